#pragma once
// AVX-512 ops for the flash kernels: 16 fp32 lanes, conversions from bf16/fp16/fp8 done in
// registers, avx512_bf16 dot products. Only flash_kernels_avx512.cpp includes this, after
// its target pragma; the struct lives in that file's ISA namespace.

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/kv_tags.h"

struct Ops {
  using V = __m512;
  using BV = __m512i;  // 32 bf16 values, consumed in pairs by dot_bf16
  static constexpr int kLanes = 16;
  // Value vectors per register block of the P.V update (4 rows each).
  static constexpr int kValueBlock = 4;
  // Keys per register block of a 4-row score product (CPU_MLA's Q K^T): 4 x this many
  // accumulators plus their operands in the ISA's vector registers.
  static constexpr int kScoreKeyBlock = 4;
  static constexpr bool kHasBf16Dot = true;
  // No load_bf16_split (simd_avx2.h): the stub below only lets the kernel templates compile.
  static constexpr bool kHasBf16Split = false;
  // No unrolled 16-key tiles in CPU_FLASH's value loop: measured on AVX2 only.
  static constexpr bool kUnrollKeyTiles = false;

  static V zero() { return _mm512_setzero_ps(); }
  static V set1(float x) { return _mm512_set1_ps(x); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static V max(V a, V b) { return _mm512_max_ps(a, b); }
  static V sub(V a, V b) { return _mm512_sub_ps(a, b); }
  static V mul(V a, V b) { return _mm512_mul_ps(a, b); }
  static V div(V a, V b) { return _mm512_div_ps(a, b); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static float hmax(V v) { return _mm512_reduce_max_ps(v); }
  static float hsum(V v) { return _mm512_reduce_add_ps(v); }

  // exp with ~2 ulp error (Cephes polynomial); inputs below -88 (including -inf) give 0,
  // NaN gives NaN (max/min return their second operand when either is NaN, so the clamp
  // takes x last).
  static V exp(V x) {
    const __mmask16 tiny = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-88.0f), _CMP_LT_OQ);
    x = _mm512_min_ps(_mm512_set1_ps(88.0f), _mm512_max_ps(_mm512_set1_ps(-88.0f), x));
    const V fx = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                      _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693359375f), x);
    x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.12194440e-4f), x);
    V y = _mm512_set1_ps(1.9875691500e-4f);
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.3981999507e-3f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(8.3334519073e-3f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(4.1665795894e-2f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.6666665459e-1f));
    y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(5.0000001201e-1f));
    y = _mm512_fmadd_ps(y, _mm512_mul_ps(x, x), _mm512_add_ps(x, _mm512_set1_ps(1.0f)));
    return _mm512_maskz_mov_ps(static_cast<__mmask16>(~tiny), _mm512_scalef_ps(y, fx));
  }
  // tanh(x) = sign(x) (1 - 2 / (exp(2|x|) + 1)); absolute error ~1e-7.
  static V tanh(V x) {
    const V ax = _mm512_abs_ps(x);
    const V e = exp(_mm512_add_ps(ax, ax));
    const V t =
        _mm512_sub_ps(_mm512_set1_ps(1.0f),
                      _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, _mm512_set1_ps(1.0f))));
    const __m512i sign = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(INT32_MIN));
    return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(t), sign));
  }

  // Lane j of the result = op over the lanes of a[j] (a transpose-and-combine tree: 45
  // ops for 16 reductions instead of 16 separate horizontal ones).
  // Op::apply(x, y) combines two vectors lane by lane (named functions, not lambdas: GCC
  // gives lambdas no target attribute from the translation unit's target pragma).
  struct Add {
    static V apply(V x, V y) { return _mm512_add_ps(x, y); }
  };
  struct Max {
    static V apply(V x, V y) { return _mm512_max_ps(x, y); }
  };
  template <typename Op>
  static V reduce_lanes_by(const V* a) {
    constexpr auto op = &Op::apply;
    V b[8], c[4];
    for (int64_t i = 0; i < 8; ++i) {
      b[i] = op(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]),
                _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
    }
    for (int64_t i = 0; i < 4; ++i) {
      c[i] = op(_mm512_shuffle_ps(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                _mm512_shuffle_ps(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    }
    const V f01 = op(_mm512_shuffle_f32x4(c[0], c[1], _MM_SHUFFLE(1, 0, 1, 0)),
                     _mm512_shuffle_f32x4(c[0], c[1], _MM_SHUFFLE(3, 2, 3, 2)));
    const V f23 = op(_mm512_shuffle_f32x4(c[2], c[3], _MM_SHUFFLE(1, 0, 1, 0)),
                     _mm512_shuffle_f32x4(c[2], c[3], _MM_SHUFFLE(3, 2, 3, 2)));
    return op(_mm512_shuffle_f32x4(f01, f23, _MM_SHUFFLE(2, 0, 2, 0)),
              _mm512_shuffle_f32x4(f01, f23, _MM_SHUFFLE(3, 1, 3, 1)));
  }
  // Lane j of the result = sum of the lanes of a[j] (the dot products of 16 keys).
  static V reduce_lanes(const V* a) { return reduce_lanes_by<Add>(a); }
  // out[i] 32-bit lane j = in[j] lane i: a 16x16 transpose of 32-bit elements (bf16 pairs).
  static void transpose16(const BV* in, BV* out) {
    __m512i a[16], b[16];
    for (int i = 0; i < 16; i += 2) {
      a[i] = _mm512_unpacklo_epi32(in[i], in[i + 1]);
      a[i + 1] = _mm512_unpackhi_epi32(in[i], in[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
      b[i] = _mm512_unpacklo_epi64(a[i], a[i + 2]);
      b[i + 1] = _mm512_unpackhi_epi64(a[i], a[i + 2]);
      b[i + 2] = _mm512_unpacklo_epi64(a[i + 1], a[i + 3]);
      b[i + 3] = _mm512_unpackhi_epi64(a[i + 1], a[i + 3]);
    }
    // b[4q + k] holds, in 128-bit block t, lane k of rows 4q..4q+3 (from block t of each).
    for (int k = 0; k < 4; ++k) {
      const __m512i lo01 = _mm512_shuffle_i32x4(b[k], b[4 + k], _MM_SHUFFLE(2, 0, 2, 0));
      const __m512i hi01 = _mm512_shuffle_i32x4(b[k], b[4 + k], _MM_SHUFFLE(3, 1, 3, 1));
      const __m512i lo23 = _mm512_shuffle_i32x4(b[8 + k], b[12 + k], _MM_SHUFFLE(2, 0, 2, 0));
      const __m512i hi23 = _mm512_shuffle_i32x4(b[8 + k], b[12 + k], _MM_SHUFFLE(3, 1, 3, 1));
      out[k] = _mm512_shuffle_i32x4(lo01, lo23, _MM_SHUFFLE(2, 0, 2, 0));
      out[8 + k] = _mm512_shuffle_i32x4(lo01, lo23, _MM_SHUFFLE(3, 1, 3, 1));
      out[4 + k] = _mm512_shuffle_i32x4(hi01, hi23, _MM_SHUFFLE(2, 0, 2, 0));
      out[12 + k] = _mm512_shuffle_i32x4(hi01, hi23, _MM_SHUFFLE(3, 1, 3, 1));
    }
  }
  // transpose16 with out[i] stored at dst + 32 i (unaligned) for i < n (16, or 8: the first
  // half). Stored straight from the registers: copying an out[] array of n vectors compiled
  // to a `rep movsq` through the stack.
  static void transpose16_store(const BV* in, uint16_t* dst, int n) {
    BV out[16];
    transpose16(in, out);
#pragma GCC unroll 8
    for (int64_t i = 0; i < 8; ++i) _mm512_storeu_si512(dst + 32 * i, out[i]);
    if (n > 8) {
#pragma GCC unroll 8
      for (int64_t i = 8; i < 16; ++i) _mm512_storeu_si512(dst + 32 * i, out[i]);
    }
  }
  // out[r] 128-bit block g = in[g] block r (a 4x4 transpose of 4-lane blocks).
  static void transpose_blocks4(const V* in, V* out) {
    const V t0 = _mm512_shuffle_f32x4(in[0], in[1], _MM_SHUFFLE(1, 0, 1, 0));
    const V t1 = _mm512_shuffle_f32x4(in[2], in[3], _MM_SHUFFLE(1, 0, 1, 0));
    const V t2 = _mm512_shuffle_f32x4(in[0], in[1], _MM_SHUFFLE(3, 2, 3, 2));
    const V t3 = _mm512_shuffle_f32x4(in[2], in[3], _MM_SHUFFLE(3, 2, 3, 2));
    out[0] = _mm512_shuffle_f32x4(t0, t1, _MM_SHUFFLE(2, 0, 2, 0));
    out[1] = _mm512_shuffle_f32x4(t0, t1, _MM_SHUFFLE(3, 1, 3, 1));
    out[2] = _mm512_shuffle_f32x4(t2, t3, _MM_SHUFFLE(2, 0, 2, 0));
    out[3] = _mm512_shuffle_f32x4(t2, t3, _MM_SHUFFLE(3, 1, 3, 1));
  }
  // Lane j of the result = max of the lanes of a[j].
  static V reduce_lanes_max(const V* a) { return reduce_lanes_by<Max>(a); }
  // Unused (the 2-row score blocks are the 8-lane path's); present so the kernel compiles.
  static V row_pair_lo(V g0, V) { return g0; }
  static V row_pair_hi(V, V g1) { return g1; }
  // Lane i of v in every lane.
  static V lane(V v, int i) { return _mm512_permutexvar_ps(_mm512_set1_epi32(i), v); }
  // The first n (<= 16) floats at p (the other lanes `fill`), and their store.
  static V load_n(const float* p, int n, float fill) {
    return _mm512_mask_loadu_ps(_mm512_set1_ps(fill), static_cast<__mmask16>((1u << n) - 1), p);
  }
  static void store_n(float* p, V v, int n) {
    _mm512_mask_storeu_ps(p, static_cast<__mmask16>((1u << n) - 1), v);
  }
  // Per lane: a == b ? if_eq : otherwise.
  static V select_eq(V a, V b, V if_eq, V otherwise) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_EQ_OQ), otherwise, if_eq);
  }
  // Keeps lanes lo..hi of s, sets the others to -inf.
  // Lanes [begin, end) of s; -inf elsewhere.
  static V mask_range(V s, int begin, int end) {
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __mmask16 keep = _mm512_cmpge_epi32_mask(iota, _mm512_set1_epi32(begin)) &
                           _mm512_cmplt_epi32_mask(iota, _mm512_set1_epi32(end));
    return _mm512_mask_mov_ps(_mm512_set1_ps(-__builtin_inff()), keep, s);
  }

  // 16 stored elements -> fp32.
  static V load_f32(attnkit::cpu::KvF32, const void* p) {
    return _mm512_loadu_ps(static_cast<const float*>(p));
  }
  static V load_f32(attnkit::cpu::KvBf16, const void* p) {
    const __m256i h = _mm256_loadu_si256(static_cast<const __m256i*>(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
  static V load_f32(attnkit::cpu::KvF16, const void* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(static_cast<const __m256i*>(p)));
  }
  // e4m3: shifting the 7 magnitude bits to fp32's exponent/mantissa position and scaling by
  // 2^(127-7) rebiases normals and denormals alike; 0x7f is NaN.
  static V load_f32(attnkit::cpu::KvE4m3, const void* p) {
    const __m512i x = _mm512_cvtepu8_epi32(_mm_loadu_si128(static_cast<const __m128i*>(p)));
    const __m512i em = _mm512_and_si512(x, _mm512_set1_epi32(0x7f));
    const V mag =
        _mm512_mul_ps(_mm512_castsi512_ps(_mm512_slli_epi32(em, 20)), _mm512_set1_ps(0x1p120f));
    const __m512i sign = _mm512_slli_epi32(_mm512_and_si512(x, _mm512_set1_epi32(0x80)), 24);
    const V v = _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(mag), sign));
    const __mmask16 nan = _mm512_cmpeq_epi32_mask(em, _mm512_set1_epi32(0x7f));
    return _mm512_mask_mov_ps(v, nan, _mm512_set1_ps(__builtin_nanf("")));
  }
  // e5m2 is the upper byte of an fp16.
  static V load_f32(attnkit::cpu::KvE5m2, const void* p) {
    const __m256i h = _mm256_cvtepu8_epi16(_mm_loadu_si128(static_cast<const __m128i*>(p)));
    return _mm512_cvtph_ps(_mm256_slli_epi16(h, 8));
  }

  // fp32 -> 16 stored elements, round-to-nearest-even (fp8 is stored element-wise).
  static void store_as(attnkit::cpu::KvF32, void* p, V v) {
    _mm512_storeu_ps(static_cast<float*>(p), v);
  }
  static void store_as(attnkit::cpu::KvBf16, void* p, V v) {
    const __m512i u = _mm512_castps_si512(v);
    const __m512i high = _mm512_srli_epi32(u, 16);
    const __m512i rounded = _mm512_srli_epi32(
        _mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff),
                                             _mm512_and_si512(high, _mm512_set1_epi32(1)))),
        16);
    const __mmask16 nan = _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q);
    const __m512i bits =
        _mm512_mask_mov_epi32(rounded, nan, _mm512_or_si512(high, _mm512_set1_epi32(0x40)));
    _mm256_storeu_si256(static_cast<__m256i*>(p), _mm512_cvtepi32_epi16(bits));
  }
  static void store_as(attnkit::cpu::KvF16, void* p, V v) {
    _mm256_storeu_si256(static_cast<__m256i*>(p),
                        _mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
  }

  // bf16 dot products: acc[i] += a[2i] b[2i] + a[2i+1] b[2i+1] (fp32 accumulation).
  static BV load_bf16_pairs(const uint16_t* p) { return _mm512_loadu_si512(p); }
  // 16 bf16 values, the upper half zero (for head sizes that are odd multiples of 16).
  static BV load_bf16_half(const uint16_t* p) {
    return _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static V dot_bf16(V acc, BV a, BV b) {
    return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh>(a), reinterpret_cast<__m512bh>(b));
  }

  // For P.V with dot_bf16: p rounded to bf16 (to nearest even) and stored as 16 values...
  static void store_bf16(uint16_t* dst, V p) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst),
                        reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(p)));
  }
  // ... the same rounded values back in fp32 (so the softmax sum matches the weights) ...
  static V round_to_bf16(V p) {
    const __m256i b = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(p));
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(b), 16));
  }
  // ... one (p_j, p_j+1) pair in every 32-bit lane ...
  static BV broadcast_pair(const uint16_t* p) {
    int32_t pair;
    __builtin_memcpy(&pair, p, sizeof(pair));
    return _mm512_set1_epi32(pair);
  }
  // ... and two value rows a, b (32 bf16 each) interleaved per column: lo holds
  // (a[i], b[i]) for columns i = 0..15 in lane i, hi the same for columns 16..31.
  static void interleave_bf16(BV a, BV b, BV& lo, BV& hi) {
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    // Word index 2i -> a[i], 2i+1 -> b[i] (bit 5 of an index selects the second source).
    const __m512i idx_lo =
        _mm512_or_si512(iota, _mm512_slli_epi32(_mm512_or_si512(iota, _mm512_set1_epi32(32)), 16));
    const __m512i sixteen = _mm512_set1_epi16(16);
    lo = _mm512_permutex2var_epi16(a, idx_lo, b);
    hi = _mm512_permutex2var_epi16(a, _mm512_add_epi16(idx_lo, sixteen), b);
  }
  static void load_bf16_split(const void*, V&, V&) {}
};
