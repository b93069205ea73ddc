// MLA kernels compiled for AVX-512 F/BW/VL/DQ. See mla_kernel_impl.h for the algorithm;
// attnkit/kernels/cpu_isa.h for how a target is chosen.

#include "kernels/cpu/isa_prelude.h"
#include "backends/cpu_mla/mla_attention.h"
#include "backends/cpu_mla/mla_plan.h"

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

namespace attnkit::cpu_mla::avx512_isa {
#include "kernels/cpu/simd_avx512.h"
// clang-format off
#include "backends/cpu_flash/flash_kernel_impl.h"
#include "backends/cpu_mla/mla_kernel_impl.h"
// clang-format on
}  // namespace attnkit::cpu_mla::avx512_isa

namespace attnkit::cpu_mla {

void mla_attention_avx512(const PagedAttentionParams& p, const MlaPlan& plan, MlaWorkspace& ws) {
  avx512_isa::run_mla(p, plan, ws);
}

}  // namespace attnkit::cpu_mla

#if defined(__clang__)
#pragma clang attribute pop
#elif defined(__GNUC__)
#pragma GCC pop_options
#endif

#endif  // x86
