// Flash-attention and cache-update kernels compiled for the portable fallback (baseline ISA).
// See flash_kernel_impl.h for the algorithm; cpu_isa.h for how a target is chosen.

#include "kernels/cpu/isa_prelude.h"

namespace attnkit::cpu::scalar_isa {
#include "kernels/cpu/simd_scalar.h"
// clang-format off
#include "backends/cpu_flash/flash_kernel_impl.h"
#include "kernels/cpu/cache_update_impl.h"
#include "backends/cpu_flash/flash_driver_impl.h"
// clang-format on
}  // namespace attnkit::cpu::scalar_isa

namespace attnkit::cpu {

void flash_attention_scalar(const PagedAttentionParams& p, const FlashPlan& plan,
                            FlashWorkspace& ws) {
  scalar_isa::run_plan(p, plan, ws, false);
}

void cache_update_scalar(const CacheUpdateParams& p) { scalar_isa::run_cache_update(p); }

}  // namespace attnkit::cpu
