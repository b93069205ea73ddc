// Flash-attention and cache-update kernels compiled for AVX2 + FMA + F16C.
// See flash_kernel_impl.h for the algorithm; cpu_isa.h for how a target is chosen.

#include "kernels/cpu/isa_prelude.h"

#if defined(__x86_64__) || defined(__i386__)

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,bmi,bmi2"))), apply_to = function)
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,bmi,bmi2")
#endif

namespace attnkit::cpu::avx2_isa {
#include "kernels/cpu/simd_avx2.h"
// clang-format off
#include "backends/cpu_flash/flash_kernel_impl.h"
#include "kernels/cpu/cache_update_impl.h"
#include "backends/cpu_flash/flash_driver_impl.h"
// clang-format on
}  // namespace attnkit::cpu::avx2_isa

namespace attnkit::cpu {

void flash_attention_avx2(const PagedAttentionParams& p, const FlashPlan& plan,
                          FlashWorkspace& ws) {
  avx2_isa::run_plan(p, plan, ws, false);
}

void cache_update_avx2(const CacheUpdateParams& p) { avx2_isa::run_cache_update(p); }

}  // namespace attnkit::cpu

#if defined(__clang__)
#pragma clang attribute pop
#elif defined(__GNUC__)
#pragma GCC pop_options
#endif

#endif  // x86
