// Conversions against known bit patterns (IEEE half, bfloat16, OCP fp8 E4M3FN and E5M2),
// round-to-nearest-even ties, saturation, and exhaustive decode -> encode round trips.
#include "attnkit/core/numeric.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace attnkit {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

TEST(BFloat16, KnownBitPatterns) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_bf16_bits(3.14159274f), 0x4049);
  EXPECT_EQ(float_to_bf16_bits(0.0f), 0x0000);
  EXPECT_EQ(float_to_bf16_bits(-0.0f), 0x8000);
  EXPECT_EQ(float_to_bf16_bits(kInf), 0x7f80);
  EXPECT_EQ(float_to_bf16_bits(-kInf), 0xff80);
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(kNaN))));
  EXPECT_EQ(bf16_bits_to_float(0x3f80), 1.0f);
  EXPECT_EQ(bf16_bits_to_float(0xc000), -2.0f);
  EXPECT_EQ(bf16_bits_to_float(0x4049), 3.140625f);
}

TEST(BFloat16, TiesRoundToEven) {
  EXPECT_EQ(float_to_bf16_bits(1.0f + 0x1p-8f), 0x3f80);             // between 0x3f80 and 0x3f81
  EXPECT_EQ(float_to_bf16_bits(1.0f + 3 * 0x1p-8f), 0x3f82);         // between 0x3f81 and 0x3f82
  EXPECT_EQ(float_to_bf16_bits(1.0f + 0x1p-8f + 0x1p-20f), 0x3f81);  // just above the tie
  EXPECT_EQ(float_to_bf16_bits(std::numeric_limits<float>::max()), 0x7f80);  // rounds to inf
}

TEST(BFloat16, EveryFiniteCodeRoundTrips) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const float f = bf16_bits_to_float(bits);
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_bf16_bits(f), bits) << std::hex << b;
  }
}

TEST(Half, KnownBitPatterns) {
  EXPECT_EQ(float_to_half_bits(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half_bits(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half_bits(0.5f), 0x3800);
  EXPECT_EQ(float_to_half_bits(0.1f), 0x2e66);
  EXPECT_EQ(float_to_half_bits(1.0f / 3.0f), 0x3555);
  EXPECT_EQ(float_to_half_bits(65504.0f), 0x7bff);      // largest finite
  EXPECT_EQ(float_to_half_bits(65519.0f), 0x7bff);      // below the tie
  EXPECT_EQ(float_to_half_bits(65520.0f), 0x7c00);      // tie rounds to even = inf
  EXPECT_EQ(float_to_half_bits(0x1p-14f), 0x0400);      // smallest normal
  EXPECT_EQ(float_to_half_bits(0x1p-24f), 0x0001);      // smallest subnormal
  EXPECT_EQ(float_to_half_bits(0x1p-25f), 0x0000);      // tie rounds to even (0)
  EXPECT_EQ(float_to_half_bits(3 * 0x1p-25f), 0x0002);  // tie rounds to even (2)
  EXPECT_EQ(float_to_half_bits(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half_bits(kInf), 0x7c00);
  EXPECT_EQ(float_to_half_bits(-kInf), 0xfc00);
  EXPECT_EQ(float_to_half_bits(1e10f), 0x7c00);
  const uint16_t nan = float_to_half_bits(kNaN);
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_EQ(half_bits_to_float(0x3c00), 1.0f);
  EXPECT_EQ(half_bits_to_float(0x0001), 0x1p-24f);
  EXPECT_EQ(half_bits_to_float(0x7bff), 65504.0f);
  EXPECT_EQ(half_bits_to_float(0x7c00), kInf);
  EXPECT_TRUE(std::isnan(half_bits_to_float(0x7e00)));
  EXPECT_TRUE(std::signbit(half_bits_to_float(0x8000)));
}

TEST(Half, TiesRoundToEven) {
  EXPECT_EQ(float_to_half_bits(1.0f + 0x1p-11f), 0x3c00);
  EXPECT_EQ(float_to_half_bits(1.0f + 3 * 0x1p-11f), 0x3c02);
  EXPECT_EQ(float_to_half_bits(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);
}

TEST(Half, EveryNonNanCodeRoundTrips) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    const auto bits = static_cast<uint16_t>(b);
    const float f = half_bits_to_float(bits);
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half_bits(f), bits) << std::hex << b;
  }
}

TEST(Fp8E4M3, KnownBitPatterns) {
  EXPECT_EQ(float_to_fp8_e4m3(1.0f), 0x38);
  EXPECT_EQ(float_to_fp8_e4m3(-1.0f), 0xb8);
  EXPECT_EQ(float_to_fp8_e4m3(448.0f), 0x7e);
  EXPECT_EQ(float_to_fp8_e4m3(-448.0f), 0xfe);
  EXPECT_EQ(float_to_fp8_e4m3(0x1p-6f), 0x08);      // smallest normal
  EXPECT_EQ(float_to_fp8_e4m3(0x1p-9f), 0x01);      // smallest subnormal
  EXPECT_EQ(float_to_fp8_e4m3(7 * 0x1p-9f), 0x07);  // largest subnormal
  EXPECT_EQ(float_to_fp8_e4m3(0.0f), 0x00);
  EXPECT_EQ(float_to_fp8_e4m3(-0.0f), 0x80);
  EXPECT_EQ(float_to_fp8_e4m3(kNaN) & 0x7f, 0x7f);
  EXPECT_EQ(fp8_e4m3_to_float(0x38), 1.0f);
  EXPECT_EQ(fp8_e4m3_to_float(0x7e), kFp8E4M3Max);
  EXPECT_EQ(fp8_e4m3_to_float(0x01), 0x1p-9f);
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(0x7f)));
  EXPECT_TRUE(std::isnan(fp8_e4m3_to_float(0xff)));
}

TEST(Fp8E4M3, SaturatesAndRoundsTiesToEven) {
  EXPECT_EQ(float_to_fp8_e4m3(464.0f), 0x7e);  // halfway to the NaN code: saturate
  EXPECT_EQ(float_to_fp8_e4m3(1e9f), 0x7e);
  EXPECT_EQ(float_to_fp8_e4m3(kInf), 0x7e);
  EXPECT_EQ(float_to_fp8_e4m3(-kInf), 0xfe);
  EXPECT_EQ(float_to_fp8_e4m3(1.0625f), 0x38);       // tie between 1.0 and 1.125
  EXPECT_EQ(float_to_fp8_e4m3(1.1875f), 0x3a);       // tie between 1.125 and 1.25
  EXPECT_EQ(float_to_fp8_e4m3(0x1p-10f), 0x00);      // tie between 0 and 2^-9
  EXPECT_EQ(float_to_fp8_e4m3(3 * 0x1p-10f), 0x02);  // tie between 1 and 2 quanta
  EXPECT_EQ(float_to_fp8_e4m3(1e-30f), 0x00);
}

TEST(Fp8E4M3, EveryNonNanCodeRoundTrips) {
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7f) == 0x7f) continue;
    const auto c = static_cast<uint8_t>(code);
    ASSERT_EQ(float_to_fp8_e4m3(fp8_e4m3_to_float(c)), c) << code;
  }
}

TEST(Fp8E5M2, KnownBitPatterns) {
  EXPECT_EQ(float_to_fp8_e5m2(1.0f), 0x3c);
  EXPECT_EQ(float_to_fp8_e5m2(-1.0f), 0xbc);
  EXPECT_EQ(float_to_fp8_e5m2(57344.0f), 0x7b);
  EXPECT_EQ(float_to_fp8_e5m2(0x1p-14f), 0x04);  // smallest normal
  EXPECT_EQ(float_to_fp8_e5m2(0x1p-16f), 0x01);  // smallest subnormal
  EXPECT_EQ(float_to_fp8_e5m2(1e9f), 0x7b);      // saturates
  EXPECT_EQ(float_to_fp8_e5m2(kInf), 0x7b);
  EXPECT_EQ(float_to_fp8_e5m2(-kInf), 0xfb);
  EXPECT_EQ(float_to_fp8_e5m2(1.125f), 0x3c);  // tie between 1.0 and 1.25
  EXPECT_EQ(float_to_fp8_e5m2(1.375f), 0x3e);  // tie between 1.25 and 1.5
  EXPECT_EQ(fp8_e5m2_to_float(0x3c), 1.0f);
  EXPECT_EQ(fp8_e5m2_to_float(0x7b), kFp8E5M2Max);
  EXPECT_EQ(fp8_e5m2_to_float(0x7c), kInf);
  EXPECT_EQ(fp8_e5m2_to_float(0xfc), -kInf);
  for (uint8_t nan : {0x7d, 0x7e, 0x7f, 0xfd, 0xfe, 0xff}) {
    EXPECT_TRUE(std::isnan(fp8_e5m2_to_float(nan))) << int{nan};
  }
  EXPECT_TRUE(std::isnan(fp8_e5m2_to_float(float_to_fp8_e5m2(kNaN))));
}

TEST(Fp8E5M2, EveryFiniteCodeRoundTrips) {
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7f) > 0x7b) continue;
    const auto c = static_cast<uint8_t>(code);
    ASSERT_EQ(float_to_fp8_e5m2(fp8_e5m2_to_float(c)), c) << code;
  }
}

TEST(Numeric, LoadAndStoreEveryFloatingType) {
  alignas(8) unsigned char buffer[16] = {};
  for (ScalarType type : {ScalarType::kFloat32, ScalarType::kFloat16, ScalarType::kBFloat16,
                          ScalarType::kFp8E4M3, ScalarType::kFp8E5M2}) {
    store_from_float(buffer, type, 1, -1.5f);
    EXPECT_EQ(load_as_float(buffer, type, 1), -1.5f) << to_string(type);
    EXPECT_EQ(round_trip(type, -1.5f), -1.5f) << to_string(type);
  }
  EXPECT_EQ(round_trip(ScalarType::kBFloat16, 1.0f + 0x1p-8f), 1.0f);
  EXPECT_EQ(round_trip(ScalarType::kFp8E4M3, 1000.0f), 448.0f);
  EXPECT_EQ(round_trip(ScalarType::kFloat32, 0.1f), 0.1f);
  store_from_float(buffer, ScalarType::kFloat16, 0, 1.0f);
  EXPECT_EQ(buffer[0] | (buffer[1] << 8), 0x3c00);  // little-endian half
}

TEST(Numeric, IntegerTypesAreErrors) {
  int32_t x = 0;
  try {
    load_as_float(&x, ScalarType::kInt32, 0);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_STREQ(e.what(), "load_as_float: not a floating type: int32");
  }
  EXPECT_THROW(store_from_float(&x, ScalarType::kUInt8, 0, 1.0f), Error);
}

}  // namespace
}  // namespace attnkit
