#pragma once
// AVX2 + FMA + F16C ops for the flash kernels: 8 fp32 lanes, conversions from
// bf16/fp16/fp8 in registers. Only flash_kernels_avx2.cpp includes this, after its target
// pragma; the struct lives in that file's ISA namespace.

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/kv_tags.h"

struct Ops {
  using V = __m256;
  using BV = __m256i;
  static constexpr int kLanes = 8;
  // Value vectors per register block of the P.V update (4 rows each).
  static constexpr int kValueBlock = 2;
  // Keys per register block of a 4-row score product (CPU_MLA's Q K^T): 4 x this many
  // accumulators plus their operands in the ISA's vector registers.
  static constexpr int kScoreKeyBlock = 2;
  static constexpr bool kHasBf16Dot = false;
  // load_bf16_split exists: bf16 rows are widened in the split column order (see there).
  static constexpr bool kHasBf16Split = true;
  // CPU_FLASH's value loop unrolls whole 16-key tiles (flash_kernel_impl.h, update_block).
  static constexpr bool kUnrollKeyTiles = true;

  static V zero() { return _mm256_setzero_ps(); }
  static V set1(float x) { return _mm256_set1_ps(x); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static V max(V a, V b) { return _mm256_max_ps(a, b); }
  static V sub(V a, V b) { return _mm256_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm256_mul_ps(a, b); }
  static V div(V a, V b) { return _mm256_div_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static float hsum(V v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
  }
  static float hmax(V v) {
    __m128 x = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_max_ps(x, _mm_movehl_ps(x, x));
    x = _mm_max_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
  }

  // exp with ~2 ulp error (Cephes polynomial); inputs below -87 (including -inf) give 0.
  static V exp(V x) {
    const V tiny = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_LT_OQ);
    // NaN stays NaN: max/min return their second operand when either is NaN.
    x = _mm256_min_ps(_mm256_set1_ps(88.0f), _mm256_max_ps(_mm256_set1_ps(-87.0f), x));
    const V fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
    V y = _mm256_set1_ps(1.9875691500e-4f);
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507e-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073e-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894e-2f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459e-1f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201e-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
    // 2^fx for fx in [-126, 127]: build the exponent field directly.
    const __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(tiny, _mm256_mul_ps(y, _mm256_castsi256_ps(e)));
  }
  static V tanh(V x) {
    const __m256 sign_bit = _mm256_castsi256_ps(_mm256_set1_epi32(INT32_MIN));
    const V ax = _mm256_andnot_ps(sign_bit, x);
    const V e = exp(_mm256_add_ps(ax, ax));
    const V t =
        _mm256_sub_ps(_mm256_set1_ps(1.0f),
                      _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, _mm256_set1_ps(1.0f))));
    return _mm256_or_ps(t, _mm256_and_ps(x, sign_bit));
  }

  struct Add {
    static V apply(V x, V y) { return _mm256_add_ps(x, y); }
  };
  struct Max {
    static V apply(V x, V y) { return _mm256_max_ps(x, y); }
  };
  // Lane j of the result = op over the lanes of a[j] (transpose-and-reduce tree).
  template <typename Op>
  static V reduce_lanes_by(const V* a) {
    constexpr auto op = &Op::apply;
    V b[4];
    for (int64_t i = 0; i < 4; ++i) {
      b[i] = op(_mm256_unpacklo_ps(a[2 * i], a[2 * i + 1]),
                _mm256_unpackhi_ps(a[2 * i], a[2 * i + 1]));
    }
    const V c0 = op(_mm256_shuffle_ps(b[0], b[1], _MM_SHUFFLE(1, 0, 1, 0)),
                    _mm256_shuffle_ps(b[0], b[1], _MM_SHUFFLE(3, 2, 3, 2)));
    const V c1 = op(_mm256_shuffle_ps(b[2], b[3], _MM_SHUFFLE(1, 0, 1, 0)),
                    _mm256_shuffle_ps(b[2], b[3], _MM_SHUFFLE(3, 2, 3, 2)));
    return op(_mm256_permute2f128_ps(c0, c1, 0x20), _mm256_permute2f128_ps(c0, c1, 0x31));
  }
  // Lane j of the result = sum of the lanes of a[j].
  static V reduce_lanes(const V* a) { return reduce_lanes_by<Add>(a); }
  // Lane j of the result = max of the lanes of a[j].
  static V reduce_lanes_max(const V* a) { return reduce_lanes_by<Max>(a); }
  // Lane i of v in every lane.
  static V lane(V v, int i) { return _mm256_permutevar8x32_ps(v, _mm256_set1_epi32(i)); }
  // The first n (<= 8) floats at p (the other lanes `fill`, not read), and their store.
  static __m256i first_lanes(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static V load_n(const float* p, int n, float fill) {
    const __m256i m = first_lanes(n);
    return _mm256_blendv_ps(_mm256_set1_ps(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
  }
  static void store_n(float* p, V v, int n) { _mm256_maskstore_ps(p, first_lanes(n), v); }
  // Per lane: a == b ? if_eq : otherwise.
  static V select_eq(V a, V b, V if_eq, V otherwise) {
    return _mm256_blendv_ps(otherwise, if_eq, _mm256_cmp_ps(a, b, _CMP_EQ_OQ));
  }
  // Row pair of a 2-row x 4-key score block: from g0 (keys 0-3) and g1 (keys 4-7), each
  // with lane 4 r + k = row r, key k, row 0's eight keys (lo) and row 1's (hi).
  static V row_pair_lo(V g0, V g1) { return _mm256_permute2f128_ps(g0, g1, 0x20); }
  static V row_pair_hi(V g0, V g1) { return _mm256_permute2f128_ps(g0, g1, 0x31); }
  // Transposes the 8 x 8 block r in place: lane j of r[i] becomes lane i of r[j].
  static void transpose8(V* r) {
    V t[8], u[8];
    for (int64_t i = 0; i < 4; ++i) {
      t[2 * i] = _mm256_unpacklo_ps(r[2 * i], r[2 * i + 1]);
      t[2 * i + 1] = _mm256_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    for (int64_t i = 0; i < 8; i += 4) {
      u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
      u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
      u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
      u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int64_t i = 0; i < 4; ++i) {
      r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
      r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
    }
  }
  // Lanes [begin, end) of s; -inf elsewhere.
  static V mask_range(V s, int begin, int end) {
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i keep = _mm256_and_si256(_mm256_cmpgt_epi32(iota, _mm256_set1_epi32(begin - 1)),
                                          _mm256_cmpgt_epi32(_mm256_set1_epi32(end), iota));
    return _mm256_blendv_ps(_mm256_set1_ps(-__builtin_inff()), s, _mm256_castsi256_ps(keep));
  }

  static V load_f32(attnkit::cpu::KvF32, const void* p) {
    return _mm256_loadu_ps(static_cast<const float*>(p));
  }
  static V load_f32(attnkit::cpu::KvBf16, const void* p) {
    const __m128i h = _mm_loadu_si128(static_cast<const __m128i*>(p));
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  // 16 bf16 at p widened to fp32 in the split column order: `even` holds elements 0, 2, ..,
  // 14 (the low halves of the 32-bit words, shifted up), `odd` elements 1, 3, .., 15 (the
  // high halves, masked). One load and two operations per 16 elements where load_f32 takes
  // two widening loads and two shifts (which compete with the FMAs for their ports).
  static void load_bf16_split(const void* p, V& even, V& odd) {
    const __m256i x = _mm256_loadu_si256(static_cast<const __m256i*>(p));
    even = _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
    odd = _mm256_castsi256_ps(_mm256_and_si256(x, _mm256_set1_epi32(-65536)));
  }
  static V load_f32(attnkit::cpu::KvF16, const void* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(static_cast<const __m128i*>(p)));
  }
  static V load_f32(attnkit::cpu::KvE4m3, const void* p) {
    const __m256i x = _mm256_cvtepu8_epi32(_mm_loadl_epi64(static_cast<const __m128i*>(p)));
    const __m256i em = _mm256_and_si256(x, _mm256_set1_epi32(0x7f));
    const V mag =
        _mm256_mul_ps(_mm256_castsi256_ps(_mm256_slli_epi32(em, 20)), _mm256_set1_ps(0x1p120f));
    const __m256i sign = _mm256_slli_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x80)), 24);
    const V v = _mm256_or_ps(mag, _mm256_castsi256_ps(sign));
    const __m256i nan = _mm256_cmpeq_epi32(em, _mm256_set1_epi32(0x7f));
    return _mm256_blendv_ps(v, _mm256_set1_ps(__builtin_nanf("")), _mm256_castsi256_ps(nan));
  }
  static V load_f32(attnkit::cpu::KvE5m2, const void* p) {
    const __m128i h = _mm_cvtepu8_epi16(_mm_loadl_epi64(static_cast<const __m128i*>(p)));
    return _mm256_cvtph_ps(_mm_slli_epi16(h, 8));
  }

  static void store_as(attnkit::cpu::KvF32, void* p, V v) {
    _mm256_storeu_ps(static_cast<float*>(p), v);
  }
  static void store_as(attnkit::cpu::KvBf16, void* p, V v) {
    const __m256i u = _mm256_castps_si256(v);
    const __m256i high = _mm256_srli_epi32(u, 16);
    const __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(u, _mm256_add_epi32(_mm256_set1_epi32(0x7fff),
                                             _mm256_and_si256(high, _mm256_set1_epi32(1)))),
        16);
    const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
    const __m256i bits = _mm256_castps_si256(
        _mm256_blendv_ps(_mm256_castsi256_ps(rounded),
                         _mm256_castsi256_ps(_mm256_or_si256(high, _mm256_set1_epi32(0x40))), nan));
    // packus works within 128-bit halves; gather the two low quadwords.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(bits, bits), 0x08);
    _mm_storeu_si128(static_cast<__m128i*>(p), _mm256_castsi256_si128(packed));
  }
  static void store_as(attnkit::cpu::KvF16, void* p, V v) {
    _mm_storeu_si128(static_cast<__m128i*>(p),
                     _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }

  // Unused (kHasBf16Dot is false); present so the kernel template compiles.
  static BV load_bf16_pairs(const uint16_t*) { return _mm256_setzero_si256(); }
  static void transpose16_store(const BV*, uint16_t*, int) {}
  static BV load_bf16_half(const uint16_t*) { return _mm256_setzero_si256(); }
  static V dot_bf16(V acc, BV, BV) { return acc; }
  static void store_bf16(uint16_t*, V) {}
  static V round_to_bf16(V p) { return p; }
  static BV broadcast_pair(const uint16_t*) { return BV{}; }
  static void interleave_bf16(BV, BV, BV&, BV&) {}
  static void transpose_blocks4(const V*, V*) {}
  static void transpose16(const BV*, BV*) {}
};
