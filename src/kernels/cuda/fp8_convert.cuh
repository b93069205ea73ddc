#pragma once
// fp8 KV-cache storage and its exact conversion to the compute dtype, shared by the CUDA
// kernels that read an fp8 cache into their tensor-core tiles (CUDA_FLASH, CUDA_MLA).
// Every e4m3 and e5m2 value, subnormals included, is representable in fp16 and in bf16,
// so the conversion loses nothing; the cache spec's scales are applied by the kernels to
// the scores and to the output, not here.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/device_common.cuh"

namespace attnkit::cuda {

// Storage types of an fp8 cache (one byte per value), as kernel template arguments.
struct Fp8E4M3 {
  uint8_t bits;
};
struct Fp8E5M2 {
  uint8_t bits;
};

template <typename KV>
inline constexpr bool kIsFp8 = std::is_same_v<KV, Fp8E4M3> || std::is_same_v<KV, Fp8E5M2>;

template <typename KV>
inline constexpr __nv_fp8_interpretation_t kFp8Interpretation =
    std::is_same_v<KV, Fp8E5M2> ? __NV_E5M2 : __NV_E4M3;

// Two fp8 values (the low 16 bits of `pair`, low byte first) as two T packed into one
// 32-bit register, exactly: one cvt to f16x2 (sm_89+ hardware), then to bf16 through fp32.
template <typename T, typename KV>
__device__ __forceinline__ uint32_t fp8x2_to(uint32_t pair) {
  const __half2_raw raw =
      __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair), kFp8Interpretation<KV>);
  if constexpr (std::is_same_v<T, __half>) {
    return static_cast<uint32_t>(raw.x) | (static_cast<uint32_t>(raw.y) << 16);
  } else {
    const float2 f = __half22float2(__half2(raw));
    return pack2<T>(f.x, f.y);
  }
}

// Bytes 2 and 3 of `word` as two fp16 (f16x2), exactly: fp8x2_to<__half, KV>(word >> 16)
// without the shift where the hardware converts fp8 (sm_89+): the cvt reads the upper half
// of the register in place.
template <typename KV>
__device__ __forceinline__ uint32_t fp8x2_high_to_half2(uint32_t word) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint32_t r;
  if constexpr (std::is_same_v<KV, Fp8E5M2>) {
    asm("{\n\t.reg .b16 lo, hi;\n\tmov.b32 {lo, hi}, %1;\n\tcvt.rn.f16x2.e5m2x2 %0, hi;\n\t}"
        : "=r"(r)
        : "r"(word));
  } else {
    asm("{\n\t.reg .b16 lo, hi;\n\tmov.b32 {lo, hi}, %1;\n\tcvt.rn.f16x2.e4m3x2 %0, hi;\n\t}"
        : "=r"(r)
        : "r"(word));
  }
  return r;
#else
  return fp8x2_to<__half, KV>(word >> 16);
#endif
}

// fp16 products over an fp8 cache with bf16 (or fp16) queries: the exponent `shift` of the
// power of two that brings a query row whose largest |q| is `big` into [2^14, 2^15) (exact:
// T has at most fp16's 11 significant bits, and the row's values that end below fp16's
// normal range are 2^28 times smaller than its largest). With 2^e <= big < 2^(e+1) (e = -127
// for a zero row) it is 14 - e, kept inside fp32's normal range; the row's scores are then
// 2^shift times too large.
__device__ __forceinline__ int fp16_row_shift(float big) {
  const int e = static_cast<int>((__float_as_uint(big) >> 23) & 0xffu) - 127;
  return min(max(14 - e, -126), 126);
}

// Eight fp8 values (8 bytes) -> eight T values (16 bytes), exactly.
template <typename T, typename KV>
__device__ __forceinline__ uint4 fp8x8_to(uint2 v) {
  return make_uint4(fp8x2_to<T, KV>(v.x), fp8x2_to<T, KV>(v.x >> 16), fp8x2_to<T, KV>(v.y),
                    fp8x2_to<T, KV>(v.y >> 16));
}

}  // namespace attnkit::cuda
