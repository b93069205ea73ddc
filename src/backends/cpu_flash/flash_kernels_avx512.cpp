// Flash-attention and cache-update kernels compiled for AVX-512 F/BW/VL/DQ (+ avx512_bf16, used
// only when the CPU has it). See flash_kernel_impl.h for the algorithm; cpu_isa.h for how a target
// is chosen.

#include "kernels/cpu/isa_prelude.h"

#if defined(__x86_64__) || defined(__i386__)

#if defined(__clang__)
#pragma clang attribute push(                                                             \
    __attribute__((                                                                       \
        target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c,bmi,bmi2"))), \
    apply_to = function)
#elif defined(__GNUC__)
#pragma GCC push_options
// GCC 12's _mm512_undefined_ps (inside _mm512_cvtph_ps) self-initialises on purpose.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c,bmi,bmi2")
#endif

namespace attnkit::cpu::avx512_isa {
#include "kernels/cpu/simd_avx512.h"
// clang-format off
#include "backends/cpu_flash/flash_kernel_impl.h"
#include "kernels/cpu/cache_update_impl.h"
#include "backends/cpu_flash/flash_driver_impl.h"
// clang-format on
}  // namespace attnkit::cpu::avx512_isa

namespace attnkit::cpu {

void flash_attention_avx512(const PagedAttentionParams& p, const FlashPlan& plan,
                            FlashWorkspace& ws, bool bf16_dot) {
  avx512_isa::run_plan(p, plan, ws, bf16_dot);
}

void cache_update_avx512(const CacheUpdateParams& p) { avx512_isa::run_cache_update(p); }

}  // namespace attnkit::cpu

#if defined(__clang__)
#pragma clang attribute pop
#elif defined(__GNUC__)
#pragma GCC pop_options
#endif

#endif  // x86
