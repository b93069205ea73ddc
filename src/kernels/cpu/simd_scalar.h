#pragma once
// Portable ops for the flash kernels: a "vector" is 8 floats handled by plain loops (the
// compiler may vectorise them with the baseline ISA). Conversions go through
// attnkit/core/numeric.h. Only flash_kernels_scalar.cpp includes this.

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "attnkit/core/numeric.h"
#include "kernels/cpu/kv_tags.h"

struct Ops {
  struct V {
    float v[8];
  };
  using BV = int;
  static constexpr int kLanes = 8;
  // Value vectors per register block of the P.V update (4 rows each).
  static constexpr int kValueBlock = 4;
  // Keys per register block of a 4-row score product (CPU_MLA's Q K^T): 4 x this many
  // accumulators plus their operands in the ISA's vector registers.
  static constexpr int kScoreKeyBlock = 4;
  static constexpr bool kHasBf16Dot = false;
  // No load_bf16_split (simd_avx2.h): the stub below only lets the kernel templates compile.
  static constexpr bool kHasBf16Split = false;
  // No unrolled 16-key tiles: unrolled scalar code multiplied the file's compile time by 6.
  static constexpr bool kUnrollKeyTiles = false;

  template <class F>
  static V map(F f) {
    V r;
    for (int i = 0; i < kLanes; ++i) r.v[i] = f(i);
    return r;
  }
  static V zero() { return set1(0.0f); }
  static V set1(float x) {
    return map([x](int) { return x; });
  }
  static V load(const float* p) {
    V r;
    std::memcpy(r.v, p, sizeof(r.v));
    return r;
  }
  static void store(float* p, V v) { std::memcpy(p, v.v, sizeof(v.v)); }
  static V add(V a, V b) {
    return map([&](int i) { return a.v[i] + b.v[i]; });
  }
  static V max(V a, V b) {
    return map([&](int i) { return a.v[i] > b.v[i] ? a.v[i] : b.v[i]; });
  }
  static V sub(V a, V b) {
    return map([&](int i) { return a.v[i] - b.v[i]; });
  }
  static V mul(V a, V b) {
    return map([&](int i) { return a.v[i] * b.v[i]; });
  }
  static V div(V a, V b) {
    return map([&](int i) { return a.v[i] / b.v[i]; });
  }
  static V fmadd(V a, V b, V c) {
    return map([&](int i) { return a.v[i] * b.v[i] + c.v[i]; });
  }
  static float hsum(V v) {
    float s = 0.0f;
    for (float x : v.v) s += x;
    return s;
  }
  static float hmax(V v) {
    float m = v.v[0];
    for (float x : v.v) m = x > m ? x : m;
    return m;
  }
  static V exp(V x) {
    return map([&](int i) { return std::exp(x.v[i]); });
  }
  static V tanh(V x) {
    return map([&](int i) { return std::tanh(x.v[i]); });
  }
  static V reduce_lanes(const V* a) {
    return map([&](int j) { return hsum(a[j]); });
  }
  // Lanes [begin, end) of s; -inf elsewhere.
  static V mask_range(V s, int begin, int end) {
    return map([&](int i) {
      return i >= begin && i < end ? s.v[i] : -std::numeric_limits<float>::infinity();
    });
  }

  static V load_f32(attnkit::cpu::KvF32, const void* p) {
    return load(static_cast<const float*>(p));
  }
  static V load_f32(attnkit::cpu::KvBf16, const void* p) {
    const auto* h = static_cast<const uint16_t*>(p);
    return map([h](int i) { return attnkit::bf16_bits_to_float(h[i]); });
  }
  static V load_f32(attnkit::cpu::KvF16, const void* p) {
    const auto* h = static_cast<const uint16_t*>(p);
    return map([h](int i) { return attnkit::half_bits_to_float(h[i]); });
  }
  static V load_f32(attnkit::cpu::KvE4m3, const void* p) {
    const auto* b = static_cast<const uint8_t*>(p);
    return map([b](int i) { return attnkit::fp8_e4m3_to_float(b[i]); });
  }
  static V load_f32(attnkit::cpu::KvE5m2, const void* p) {
    const auto* b = static_cast<const uint8_t*>(p);
    return map([b](int i) { return attnkit::fp8_e5m2_to_float(b[i]); });
  }

  static void store_as(attnkit::cpu::KvF32, void* p, V v) { store(static_cast<float*>(p), v); }
  static void store_as(attnkit::cpu::KvBf16, void* p, V v) {
    auto* h = static_cast<uint16_t*>(p);
    for (int i = 0; i < kLanes; ++i) h[i] = attnkit::float_to_bf16_bits(v.v[i]);
  }
  static void store_as(attnkit::cpu::KvF16, void* p, V v) {
    auto* h = static_cast<uint16_t*>(p);
    for (int i = 0; i < kLanes; ++i) h[i] = attnkit::float_to_half_bits(v.v[i]);
  }

  static BV load_bf16_pairs(const uint16_t*) { return 0; }
  static void transpose16_store(const BV*, uint16_t*, int) {}
  static BV load_bf16_half(const uint16_t*) { return 0; }
  static V dot_bf16(V acc, BV, BV) { return acc; }
  static void store_bf16(uint16_t*, V) {}
  static V round_to_bf16(V p) { return p; }
  static BV broadcast_pair(const uint16_t*) { return BV{}; }
  static void interleave_bf16(BV, BV, BV&, BV&) {}
  static void transpose_blocks4(const V*, V*) {}
  static void transpose16(const BV*, BV*) {}
  // Lane j of the result = max of the lanes of a[j].
  static V reduce_lanes_max(const V* a) {
    return map([&](int j) { return hmax(a[j]); });
  }
  // Row pair of a 2-row x 4-key score block (lane 4 r + k): row 0's eight keys, row 1's.
  static V row_pair_lo(V g0, V g1) {
    return map([&](int i) { return i < 4 ? g0.v[i] : g1.v[i - 4]; });
  }
  static V row_pair_hi(V g0, V g1) {
    return map([&](int i) { return i < 4 ? g0.v[i + 4] : g1.v[i]; });
  }
  // Lane i of v in every lane.
  static V lane(V v, int i) { return set1(v.v[i]); }
  // The first n (<= 8) floats at p (the other lanes `fill`, not read), and their store.
  static V load_n(const float* p, int n, float fill) {
    return map([&](int i) { return i < n ? p[i] : fill; });
  }
  static void store_n(float* p, V v, int n) {
    for (int i = 0; i < n; ++i) p[i] = v.v[i];
  }
  // Per lane: a == b ? if_eq : otherwise.
  static V select_eq(V a, V b, V if_eq, V otherwise) {
    return map([&](int i) { return a.v[i] == b.v[i] ? if_eq.v[i] : otherwise.v[i]; });
  }
  static void load_bf16_split(const void*, V&, V&) {}
};
