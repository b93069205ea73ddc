// Opens the per-target region of a per-ISA kernel file: the one place that turns on a SIMD
// target's instruction sets (no #pragma once: a file includes it once, then target_end.h).
//
// A per-ISA file defines exactly one of ATTNKIT_CPU_TARGET_SCALAR, ATTNKIT_CPU_TARGET_AVX2,
// ATTNKIT_CPU_TARGET_AVX512, ATTNKIT_CPU_TARGET_AVX512_AMX, includes isa_prelude.h and its own
// headers (those stay compiled for the baseline ISA: inline functions they define may be shared
// with other translation units, and must not carry AVX-512 code into them), then this file, then,
// inside
//   #if ATTNKIT_TARGET_ENABLED
//   namespace <its namespace>::ATTNKIT_TARGET_NS { #include ATTNKIT_TARGET_SIMD ... }
// its kernel headers, and finally target_end.h. Defines:
//   ATTNKIT_TARGET_ENABLED  1 when this target can be compiled here (x86 for AVX2/AVX-512);
//   ATTNKIT_TARGET_NS       the per-target namespace name (scalar_isa, avx2_isa, avx512_isa,
//                           avx512_amx_isa);
//   ATTNKIT_TARGET_SIMD     the target's Ops header (simd_<isa>.h).

#if defined(ATTNKIT_TARGET_OPEN)
#error "kernels/cpu/target_begin.h included twice without target_end.h"
#endif
#define ATTNKIT_TARGET_OPEN 1

#if defined(__x86_64__) || defined(__i386__)
#define ATTNKIT_TARGET_X86 1
#else
#define ATTNKIT_TARGET_X86 0
#endif

#if defined(ATTNKIT_CPU_TARGET_SCALAR)
#define ATTNKIT_TARGET_ENABLED 1
#define ATTNKIT_TARGET_NS scalar_isa
#define ATTNKIT_TARGET_SIMD "kernels/cpu/simd_scalar.h"

#elif defined(ATTNKIT_CPU_TARGET_AVX2)
#define ATTNKIT_TARGET_ENABLED ATTNKIT_TARGET_X86
#define ATTNKIT_TARGET_NS avx2_isa
#define ATTNKIT_TARGET_SIMD "kernels/cpu/simd_avx2.h"
#if ATTNKIT_TARGET_X86
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,f16c,bmi,bmi2"))), apply_to = function)
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC target("avx2,fma,f16c,bmi,bmi2")
#endif
#endif

#elif defined(ATTNKIT_CPU_TARGET_AVX512)
// AVX-512 F/BW/VL/DQ, plus avx512_bf16 (used only when the CPU has it).
#define ATTNKIT_TARGET_ENABLED ATTNKIT_TARGET_X86
#define ATTNKIT_TARGET_NS avx512_isa
#define ATTNKIT_TARGET_SIMD "kernels/cpu/simd_avx512.h"
#if ATTNKIT_TARGET_X86
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
#endif

#elif defined(ATTNKIT_CPU_TARGET_AVX512_AMX)
// The AVX-512 target plus AMX-TILE and AMX-BF16 (CPU_MLA's tile kernels; used only where
// the CPU has them and the OS grants the tile state, cpu_isa.h's amx_bf16_enabled()).
#define ATTNKIT_TARGET_ENABLED ATTNKIT_TARGET_X86
#define ATTNKIT_TARGET_NS avx512_amx_isa
#define ATTNKIT_TARGET_SIMD "kernels/cpu/simd_avx512.h"
#if ATTNKIT_TARGET_X86
#if defined(__clang__)
#pragma clang attribute push(                                                                        \
    __attribute__((target(                                                                           \
        "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c,bmi,bmi2,amx-tile,amx-bf16"))), \
    apply_to = function)
#elif defined(__GNUC__)
#pragma GCC push_options
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC target( \
    "avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx2,fma,f16c,bmi,bmi2,amx-tile,amx-bf16")
#endif
#endif

#else
#error \
    "define ATTNKIT_CPU_TARGET_SCALAR, _AVX2, _AVX512 or _AVX512_AMX before kernels/cpu/target_begin.h"
#endif
