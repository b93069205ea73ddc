// Flash-attention kernels on AMX tiles, compiled for AVX-512 + AMX-TILE + AMX-BF16 and run
// only where the CPU has them and the OS grants the tile state (cpu_isa.h's
// amx_bf16_enabled()). See flash_amx_impl.h for the algorithm; kernels/cpu/target_begin.h for
// the per-target mechanism.

#define ATTNKIT_CPU_TARGET_AVX512_AMX
#include "backends/cpu_flash/flash_amx_layout.h"
#include "backends/cpu_flash/flash_kernels.h"
#include "backends/cpu_flash/flash_plan.h"
#include "kernels/cpu/isa_prelude.h"
// The target region: everything below until target_end.h is compiled for this target.
#include "kernels/cpu/target_begin.h"

#if ATTNKIT_TARGET_ENABLED

namespace attnkit::cpu::ATTNKIT_TARGET_NS {
// clang-format off
#include ATTNKIT_TARGET_SIMD
#include "kernels/cpu/amx_tiles.h"
#include "backends/cpu_flash/flash_kernel_impl.h"
#include "backends/cpu_flash/flash_driver_impl.h"
#include "backends/cpu_flash/flash_amx_impl.h"
// clang-format on
}  // namespace attnkit::cpu::ATTNKIT_TARGET_NS

namespace attnkit::cpu {

void flash_attention_amx(const PagedAttentionParams& p, const FlashPlan& plan, FlashWorkspace& ws,
                         bool bf16_dot) {
  ATTNKIT_TARGET_NS::run_plan_amx(p, plan, ws, bf16_dot);
}

}  // namespace attnkit::cpu

#endif  // ATTNKIT_TARGET_ENABLED

#include "kernels/cpu/target_end.h"
