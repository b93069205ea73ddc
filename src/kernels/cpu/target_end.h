// Closes the per-target region opened by target_begin.h (no #pragma once, see there).

#if !defined(ATTNKIT_TARGET_OPEN)
#error "kernels/cpu/target_end.h without kernels/cpu/target_begin.h"
#endif

#if ATTNKIT_TARGET_X86 &&                                                      \
    (defined(ATTNKIT_CPU_TARGET_AVX2) || defined(ATTNKIT_CPU_TARGET_AVX512) || \
     defined(ATTNKIT_CPU_TARGET_AVX512_AMX))
#if defined(__clang__)
#pragma clang attribute pop
#elif defined(__GNUC__)
#pragma GCC pop_options
#endif
#endif

#undef ATTNKIT_TARGET_OPEN
#undef ATTNKIT_TARGET_X86
#undef ATTNKIT_TARGET_ENABLED
#undef ATTNKIT_TARGET_NS
#undef ATTNKIT_TARGET_SIMD
