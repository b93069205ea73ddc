#pragma once
// Scalar conversions between float and the 16-bit and 8-bit storage formats, shared by
// the reference backend, the CPU kernels and host-side tests. Round-to-nearest-even.
// fp8 e4m3 is OCP E4M3FN (max 448, no infinities, NaN = 0x7f/0xff); fp8 e5m2 is IEEE-like
// (max 57344, has infinities). Values beyond the fp8 range saturate to the largest finite
// value (what vLLM's scaled fp8 conversion does).

#include <bit>
#include <cmath>
#include <cstdint>

#include "attnkit/core/enums.h"
#include "attnkit/export.h"

#if defined(__CUDACC__)
#define ATTNKIT_HOST_DEVICE __host__ __device__
#else
#define ATTNKIT_HOST_DEVICE
#endif

namespace attnkit {

struct ATTNKIT_API Half {
  uint16_t bits;
};
struct ATTNKIT_API BFloat16 {
  uint16_t bits;
};
struct ATTNKIT_API Fp8E4M3 {
  uint8_t bits;
};
struct ATTNKIT_API Fp8E5M2 {
  uint8_t bits;
};

inline float bf16_bits_to_float(uint16_t b) { return std::bit_cast<float>(uint32_t{b} << 16); }

inline uint16_t float_to_bf16_bits(float f) {
  uint32_t u = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

ATTNKIT_API float half_bits_to_float(uint16_t h);
ATTNKIT_API uint16_t float_to_half_bits(float f);
ATTNKIT_API float fp8_e4m3_to_float(uint8_t v);
ATTNKIT_API uint8_t float_to_fp8_e4m3(float f);
ATTNKIT_API float fp8_e5m2_to_float(uint8_t v);
ATTNKIT_API uint8_t float_to_fp8_e5m2(float f);

// Largest finite value of each fp8 format.
inline constexpr float kFp8E4M3Max = 448.0f;
inline constexpr float kFp8E5M2Max = 57344.0f;

// Reads element `i` of a buffer of `type` as float (floating types only).
ATTNKIT_API float load_as_float(const void* data, ScalarType type, int64_t i);
// Writes `value` rounded to `type` into element `i`.
ATTNKIT_API void store_from_float(void* data, ScalarType type, int64_t i, float value);
// The value `x` becomes after a round trip through `type` (for building exact oracles).
ATTNKIT_API float round_trip(ScalarType type, float x);

}  // namespace attnkit
