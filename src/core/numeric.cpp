#include "attnkit/core/numeric.h"

#include <cmath>

namespace attnkit {
namespace {

// A small float format with `mant_bits` mantissa bits and exponent bias `bias`, stored in
// the low 7 bits of a byte plus a sign bit (fp8). Normal and subnormal encodings are
// contiguous, so encoding is: scale |x| to units of its binade's quantum, round to
// nearest even, and add the exponent field.
struct Fp8Format {
  int mant_bits;
  int bias;
  uint8_t max_code;  // largest finite magnitude code (0x7e for e4m3fn, 0x7b for e5m2)
  uint8_t nan_code;
};
constexpr Fp8Format kE4M3{3, 7, 0x7e, 0x7f};
constexpr Fp8Format kE5M2{2, 15, 0x7b, 0x7f};

float fp8_decode(uint8_t v, const Fp8Format& fmt, bool has_inf) {
  const bool neg = (v & 0x80u) != 0;
  const int code = v & 0x7f;
  const int exp = code >> fmt.mant_bits;
  const int mant = code & ((1 << fmt.mant_bits) - 1);
  float mag;
  if (has_inf && code == 0x7c) {
    mag = INFINITY;
  } else if (code > fmt.max_code) {
    return NAN;
  } else if (exp == 0) {
    mag = std::ldexp(static_cast<float>(mant), 1 - fmt.bias - fmt.mant_bits);
  } else {
    mag =
        std::ldexp(static_cast<float>((1 << fmt.mant_bits) + mant), exp - fmt.bias - fmt.mant_bits);
  }
  return neg ? -mag : mag;
}

uint8_t fp8_encode(float f, const Fp8Format& fmt) {
  if (std::isnan(f)) return fmt.nan_code;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0x00;
  const float mag = std::fabs(f);
  const float max_value = fp8_decode(fmt.max_code, fmt, false);
  if (mag >= max_value) return sign | fmt.max_code;  // saturate (also +-inf)
  if (mag == 0.0f) return sign;
  int e = 0;
  std::frexp(mag, &e);                      // mag = m * 2^e with m in [0.5, 1)
  const int min_normal_exp = 1 - fmt.bias;  // unbiased exponent of the smallest normal
  int exp_unbiased = e - 1;
  if (exp_unbiased < min_normal_exp) exp_unbiased = min_normal_exp;  // subnormal binade
  // Quantum of this binade: 2^(exp - mant_bits). The code's low bits count quanta.
  const float q = std::nearbyint(std::ldexp(mag, fmt.mant_bits - exp_unbiased));
  // q counts quanta from 0 (subnormal) or from 2^mant_bits (normal); both map to code by
  // code = (exp_field << mant_bits) + (q - 2^mant_bits), contiguous across binades.
  const int exp_field = exp_unbiased + fmt.bias;
  int code;
  if (exp_field == 1 && q < static_cast<float>(1 << fmt.mant_bits)) {
    code = static_cast<int>(q);  // subnormal
  } else {
    code = (exp_field << fmt.mant_bits) + static_cast<int>(q) - (1 << fmt.mant_bits);
  }
  if (code > fmt.max_code) code = fmt.max_code;
  return static_cast<uint8_t>(sign | code);
}

}  // namespace

float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign != 0 ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
}

uint16_t float_to_half_bits(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t a = x & 0x7fffffffu;
  if (a >= 0x7f800000u) return static_cast<uint16_t>(sign | (a > 0x7f800000u ? 0x7e00u : 0x7c00u));
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds past 65504
  if (a < 0x38800000u) {
    // Below the smallest normal half (2^-14): adding 0.5 makes the FPU round |f| to a
    // multiple of 2^-24 (the half subnormal quantum), nearest-even.
    const float v = std::bit_cast<float>(a) + 0.5f;
    return static_cast<uint16_t>(sign | (std::bit_cast<uint32_t>(v) - 0x3f000000u));
  }
  const uint32_t mant_odd = (a >> 13) & 1u;
  a += 0xc8000fffu + mant_odd;  // rebias exponent (127 -> 15) and round to nearest even
  return static_cast<uint16_t>(sign | (a >> 13));
}

float fp8_e4m3_to_float(uint8_t v) { return fp8_decode(v, kE4M3, false); }
uint8_t float_to_fp8_e4m3(float f) { return fp8_encode(f, kE4M3); }
float fp8_e5m2_to_float(uint8_t v) { return fp8_decode(v, kE5M2, true); }
uint8_t float_to_fp8_e5m2(float f) {
  if (std::isinf(f)) return std::signbit(f) ? 0xfb : 0x7b;  // saturate like finite overflow
  return fp8_encode(f, kE5M2);
}

float load_as_float(const void* data, ScalarType type, int64_t i) {
  switch (type) {
    case ScalarType::kFloat32:
      return static_cast<const float*>(data)[i];
    case ScalarType::kFloat16:
      return half_bits_to_float(static_cast<const uint16_t*>(data)[i]);
    case ScalarType::kBFloat16:
      return bf16_bits_to_float(static_cast<const uint16_t*>(data)[i]);
    case ScalarType::kFp8E4M3:
      return fp8_e4m3_to_float(static_cast<const uint8_t*>(data)[i]);
    case ScalarType::kFp8E5M2:
      return fp8_e5m2_to_float(static_cast<const uint8_t*>(data)[i]);
    default:
      break;
  }
  throw Error(ErrorCode::kInvalidArgument,
              std::string("load_as_float: not a floating type: ") + std::string(to_string(type)));
}

void store_from_float(void* data, ScalarType type, int64_t i, float value) {
  switch (type) {
    case ScalarType::kFloat32:
      static_cast<float*>(data)[i] = value;
      return;
    case ScalarType::kFloat16:
      static_cast<uint16_t*>(data)[i] = float_to_half_bits(value);
      return;
    case ScalarType::kBFloat16:
      static_cast<uint16_t*>(data)[i] = float_to_bf16_bits(value);
      return;
    case ScalarType::kFp8E4M3:
      static_cast<uint8_t*>(data)[i] = float_to_fp8_e4m3(value);
      return;
    case ScalarType::kFp8E5M2:
      static_cast<uint8_t*>(data)[i] = float_to_fp8_e5m2(value);
      return;
    default:
      break;
  }
  throw Error(ErrorCode::kInvalidArgument, std::string("store_from_float: not a floating type: ") +
                                               std::string(to_string(type)));
}

float round_trip(ScalarType type, float x) {
  unsigned char buf[4];
  store_from_float(buf, type, 0, x);
  return load_as_float(buf, type, 0);
}

}  // namespace attnkit
