// Flash-attention kernels compiled for AVX2 + FMA + F16C. See flash_kernel_impl.h
// for the algorithm; kernels/cpu/target_begin.h for the per-target mechanism.

#define ATTNKIT_CPU_TARGET_AVX2
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
#include "backends/cpu_flash/flash_outer_product_impl.h"
// clang-format on
}  // namespace attnkit::cpu::ATTNKIT_TARGET_NS

namespace attnkit::cpu {

void flash_attention_avx2(const PagedAttentionParams& p, const FlashPlan& plan,
                          FlashWorkspace& ws) {
  ATTNKIT_TARGET_NS::run_plan_outer_product(p, plan, ws);
}

}  // namespace attnkit::cpu

#endif  // ATTNKIT_TARGET_ENABLED

#include "kernels/cpu/target_end.h"
