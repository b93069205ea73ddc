// Flash-attention kernels compiled for the portable fallback (baseline ISA). See
// flash_kernel_impl.h for the algorithm; kernels/cpu/target_begin.h for the per-target mechanism.

#define ATTNKIT_CPU_TARGET_SCALAR
#include "backends/cpu_flash/flash_kernels.h"
#include "backends/cpu_flash/flash_plan.h"
#include "kernels/cpu/isa_prelude.h"
// The target region: everything below until target_end.h is compiled for this target.
#include "kernels/cpu/target_begin.h"

#if ATTNKIT_TARGET_ENABLED

namespace attnkit::cpu::ATTNKIT_TARGET_NS {
// clang-format off
#include ATTNKIT_TARGET_SIMD
#include "backends/cpu_flash/flash_kernel_impl.h"
#include "backends/cpu_flash/flash_driver_impl.h"
// clang-format on
}  // namespace attnkit::cpu::ATTNKIT_TARGET_NS

namespace attnkit::cpu {

void flash_attention_scalar(const PagedAttentionParams& p, const FlashPlan& plan,
                            FlashWorkspace& ws) {
  ATTNKIT_TARGET_NS::run_plan(p, plan, ws, false);
}

}  // namespace attnkit::cpu

#endif  // ATTNKIT_TARGET_ENABLED

#include "kernels/cpu/target_end.h"
