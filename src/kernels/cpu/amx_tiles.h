#pragma once
// AMX-BF16 tile building blocks of the CPU attention kernels (CPU_MLA's mla_amx_impl.h,
// CPU_FLASH's flash_amx_impl.h), compiled into their AVX-512 + AMX translation units
// (kernels/cpu/target_begin.h, ATTNKIT_CPU_TARGET_AVX512_AMX) inside the ISA namespace, after
// simd_avx512.h's Ops.
//
// The layout they share: query rows in groups of 16 (a tile's rows), keys in 16-key tiles,
// up to four per step (kAmxStepKeys). Scores come out transposed (S^T [16 keys][16 rows],
// a row in each lane, so the online softmax needs no horizontal reductions); probabilities
// go into A tiles of two kinds per key tile, p in the first bf16 of each pair (zeros in the
// second) and p in the second, so that P . V takes V's rows as B tiles as they lie: the first
// kind gives the even columns of 32, the second the odd ones. O keeps that column order until
// amx_restore_columns().
//
// With several row groups over the same keys (AmxPLayout::kKeyPairs) the step's V rows are
// interleaved by key pairs once (amx_interleave_values), which every group then uses: the
// probabilities go into one A tile per 32 keys ([16 rows][32 keys]) and each tile product
// is whole, half as many as the even/odd form's half-used ones. O then holds each 32
// columns in unpack order (amx_restore_columns with kKeyPairs).
//
// The exponent base of a row moves only when a step's maximum exceeds it by more than
// kAmxRescaleSlack (e^8 ~ 3000: p and the sums stay far from fp32's range), so the
// accumulators are rescaled a few times per item instead of at every step; the output is
// O / l whatever the base, and a split chunk passes its base on as its m for the merge.

// Requires kernels/cpu/amx_geometry.h (kAmxRows, kAmxStepKeys) included before it.

// The tile configuration: palette 1, tiles 0-7 all 16 rows of 64 bytes (a 16 x 16 fp32
// accumulator, 16 rows of 32 bf16, or 16 pairs x 16 columns).
struct alignas(64) AmxTileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

inline constexpr float kAmxRescaleSlack = 8.0f;

// How the probabilities are laid out for P . V (see above).
enum class AmxPLayout {
  kEvenOdd,   // two A tiles per 16 keys, V's rows as B tiles as they lie
  kKeyPairs,  // one A tile per 32 keys, V interleaved by key pairs (amx_interleave_values)
};

// A tile load that tells the compiler it reads memory. GCC's _tile_loadd is an asm statement
// without a memory clobber, so the stores just made for it (probabilities, rescaled rows of
// O, staged key rows) could be moved past it.
#define ATTNKIT_TILE_LOAD(tile, base, stride)                                                \
  __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #tile ::"r"(static_cast<const void*>(base)), \
                   "r"(static_cast<int64_t>(stride))                                         \
                   : "memory")

// Scores of one row group against the subs (1-4) 16-key tiles of the step: S^T tile s
// ([16 keys][16 rows] fp32) stored at st + 256 s. ka[s] / ka_stride[s]: the tile's first key
// row and the byte distance between its rows; qt: the group's Q^T pairs.
inline void amx_scores(const uint16_t* const* ka, const int64_t* ka_stride, int subs,
                       const uint16_t* qt, int D, float* st) {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t c = 0; c < D; c += 32) {
    // B: pairs c/2 .. c/2 + 15 of every row; A: elements c .. c + 31 of 16 keys.
    ATTNKIT_TILE_LOAD(5, qt + c * 16, 64);
    ATTNKIT_TILE_LOAD(4, ka[0] + c, ka_stride[0]);
    _tile_dpbf16ps(0, 4, 5);
    if (subs > 1) {
      ATTNKIT_TILE_LOAD(6, ka[1] + c, ka_stride[1]);
      _tile_dpbf16ps(1, 6, 5);
    }
    if (subs > 2) {
      ATTNKIT_TILE_LOAD(7, ka[2] + c, ka_stride[2]);
      _tile_dpbf16ps(2, 7, 5);
    }
    if (subs > 3) {
      ATTNKIT_TILE_LOAD(4, ka[3] + c, ka_stride[3]);
      _tile_dpbf16ps(3, 4, 5);
    }
  }
  _tile_stored(0, st, 64);
  if (subs > 1) _tile_stored(1, st + 256, 64);
  if (subs > 2) _tile_stored(2, st + 512, 64);
  if (subs > 3) _tile_stored(3, st + 768, 64);
}

// Scores of two row groups (Q^T pairs at qt0 and qt1) against the step's `tiles` 16-key
// tiles, two key tiles at a time (2 x 2 accumulator tiles): each K tile loaded serves both
// groups and each Q^T tile two key tiles, half the operand loads of amx_scores per product.
// S^T tile t of group i ([16 keys][16 rows] fp32) at st_i + 256 t.
inline void amx_scores2(const uint16_t* const* ka, const int64_t* ka_stride, int tiles,
                        const uint16_t* qt0, const uint16_t* qt1, int D, float* st0, float* st1) {
  int t = 0;
  for (; t + 2 <= tiles; t += 2) {
    _tile_zero(0);
    _tile_zero(1);
    _tile_zero(2);
    _tile_zero(3);
    for (int64_t c = 0; c < D; c += 32) {
      ATTNKIT_TILE_LOAD(4, ka[t] + c, ka_stride[t]);
      ATTNKIT_TILE_LOAD(6, qt0 + c * 16, 64);
      ATTNKIT_TILE_LOAD(7, qt1 + c * 16, 64);
      _tile_dpbf16ps(0, 4, 6);
      ATTNKIT_TILE_LOAD(5, ka[t + 1] + c, ka_stride[t + 1]);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, st0 + int64_t{256} * t, 64);
    _tile_stored(1, st1 + int64_t{256} * t, 64);
    _tile_stored(2, st0 + int64_t{256} * (t + 1), 64);
    _tile_stored(3, st1 + int64_t{256} * (t + 1), 64);
  }
  if (t < tiles) {  // an odd tile count: the last key tile, one group at a time
    amx_scores(ka + t, ka_stride + t, 1, qt0, D, st0 + int64_t{256} * t);
    amx_scores(ka + t, ka_stride + t, 1, qt1, D, st1 + int64_t{256} * t);
  }
}

// O [16 rows][DV] (row stride DV floats) += P . V over the step's `tiles` 16-key tiles, V
// straight from their latent rows (kv[t], kv_stride[t] bytes apart): of each 32 columns,
// O's first 16 positions take the even columns (A_even), the next 16 the odd ones (A_odd).
// The two accumulator tiles stay in registers across the step's key tiles.
inline void amx_values(float* o, int DV, const uint16_t* pa, const uint16_t* const* kv,
                       const int64_t* kv_stride, int tiles) {
  const int64_t o_stride = int64_t{DV} * 4;
  for (int64_t c = 0; c < DV; c += 32) {
    ATTNKIT_TILE_LOAD(0, o + c, o_stride);
    ATTNKIT_TILE_LOAD(1, o + c + 16, o_stride);
    for (int t = 0; t < tiles; ++t) {
      ATTNKIT_TILE_LOAD(2, pa + int64_t{1024} * t, 64);
      ATTNKIT_TILE_LOAD(3, pa + int64_t{1024} * t + 512, 64);
      ATTNKIT_TILE_LOAD(4, kv[t] + c, kv_stride[t]);
      _tile_dpbf16ps(0, 2, 4);
      _tile_dpbf16ps(1, 3, 4);
    }
    _tile_stored(0, o + c, o_stride);
    _tile_stored(1, o + c + 16, o_stride);
  }
}

// Puts the columns of `rows` rows of O (DV floats each) back in order. kEvenOdd: of each 32,
// positions 0-15 held the even columns and 16-31 the odd ones. kKeyPairs: positions 0-15
// held columns 0-3, 8-11, 16-19, 24-27 and 16-31 columns 4-7, 12-15, 20-23, 28-31 (the
// order of a 16-bit unpack within 128-bit lanes).
template <AmxPLayout L = AmxPLayout::kEvenOdd>
inline void amx_restore_columns(float* o, int rows, int DV) {
  const __m512i first =
      L == AmxPLayout::kEvenOdd
          ? _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23)
          : _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
  const __m512i second =
      L == AmxPLayout::kEvenOdd
          ? _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31)
          : _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = o + r * DV;
    for (int64_t c = 0; c < DV; c += 32) {
      const __m512 lo = _mm512_loadu_ps(row + c);
      const __m512 hi = _mm512_loadu_ps(row + c + 16);
      _mm512_storeu_ps(row + c, _mm512_permutex2var_ps(lo, first, hi));
      _mm512_storeu_ps(row + c + 16, _mm512_permutex2var_ps(lo, second, hi));
    }
  }
}

// V's rows of a step interleaved by key pairs: the B tiles of amx_values_pairs. The step's
// `tiles` 16-key tiles are kv[t] (first row), kv_stride[t] bytes between rows; of each row
// the first DV bf16 values are V's. Chunk ch (keys 32 ch .. 32 ch + 31) and 32-column block b
// give two tiles, at vi + 512 (2 (ch DV / 32 + b)) and 512 further: row i holds the pairs
// (key 32 ch + 2 i, key 32 ch + 2 i + 1) of 16 columns, columns 0-3, 8-11, 16-19, 24-27 of
// the block in the first tile and 4-7, 12-15, 20-23, 28-31 in the second. Keys past the
// step's tiles are zero rows (their probabilities are 0, and 0 times a stale value could
// be NaN).
inline void amx_interleave_values(const uint16_t* const* kv, const int64_t* kv_stride, int tiles,
                                  int DV, uint16_t* vi) {
  const int chunks = (tiles + 1) / 2;
  const int64_t blocks = DV / 32;
  for (int ch = 0; ch < chunks; ++ch) {
    for (int i = 0; i < 16; ++i) {
      const int key = 32 * ch + 2 * i;  // even: key and key + 1 are in the same 16-key tile
      const int t = key / 16;
      uint16_t* dst = vi + int64_t{ch} * blocks * 1024 + int64_t{32} * i;
      if (t >= tiles) {
        for (int64_t b = 0; b < blocks; ++b) {
          _mm512_storeu_si512(dst + 1024 * b, _mm512_setzero_si512());
          _mm512_storeu_si512(dst + 1024 * b + 512, _mm512_setzero_si512());
        }
        continue;
      }
      const auto* r0 = reinterpret_cast<const char*>(kv[t]) + int64_t{key % 16} * kv_stride[t];
      const char* r1 = r0 + kv_stride[t];
      for (int64_t b = 0; b < blocks; ++b) {
        const __m512i a = _mm512_loadu_si512(r0 + 64 * b);
        const __m512i c = _mm512_loadu_si512(r1 + 64 * b);
        _mm512_storeu_si512(dst + 1024 * b, _mm512_unpacklo_epi16(a, c));
        _mm512_storeu_si512(dst + 1024 * b + 512, _mm512_unpackhi_epi16(a, c));
      }
    }
  }
}

// O [16 rows][DV] (row stride DV floats) += P . V over `chunks` 32-key chunks: P's A tile of
// chunk ch at pa + 512 ch ([16 rows][32 keys] bf16), V's B tiles from amx_interleave_values.
// Four accumulator tiles (64 columns) at a time, each A tile loaded once for all four.
inline void amx_values_pairs(float* o, int DV, const uint16_t* pa, const uint16_t* vi, int chunks) {
  const int64_t o_stride = int64_t{DV} * 4;
  const int64_t blocks = DV / 32;
  int64_t c = 0;
  for (; c + 64 <= DV; c += 64) {
    ATTNKIT_TILE_LOAD(0, o + c, o_stride);
    ATTNKIT_TILE_LOAD(1, o + c + 16, o_stride);
    ATTNKIT_TILE_LOAD(2, o + c + 32, o_stride);
    ATTNKIT_TILE_LOAD(3, o + c + 48, o_stride);
    for (int64_t ch = 0; ch < chunks; ++ch) {
      const uint16_t* b = vi + (ch * blocks + c / 32) * 1024;
      ATTNKIT_TILE_LOAD(4, pa + 512 * ch, 64);
      ATTNKIT_TILE_LOAD(5, b, 64);
      ATTNKIT_TILE_LOAD(6, b + 512, 64);
      _tile_dpbf16ps(0, 4, 5);
      ATTNKIT_TILE_LOAD(7, b + 1024, 64);
      _tile_dpbf16ps(1, 4, 6);
      ATTNKIT_TILE_LOAD(5, b + 1536, 64);
      _tile_dpbf16ps(2, 4, 7);
      _tile_dpbf16ps(3, 4, 5);
    }
    _tile_stored(0, o + c, o_stride);
    _tile_stored(1, o + c + 16, o_stride);
    _tile_stored(2, o + c + 32, o_stride);
    _tile_stored(3, o + c + 48, o_stride);
  }
  if (c < DV) {  // DV % 64 == 32: one block left
    ATTNKIT_TILE_LOAD(0, o + c, o_stride);
    ATTNKIT_TILE_LOAD(1, o + c + 16, o_stride);
    for (int64_t ch = 0; ch < chunks; ++ch) {
      const uint16_t* b = vi + (ch * blocks + c / 32) * 1024;
      ATTNKIT_TILE_LOAD(4, pa + 512 * ch, 64);
      ATTNKIT_TILE_LOAD(5, b, 64);
      ATTNKIT_TILE_LOAD(6, b + 512, 64);
      _tile_dpbf16ps(0, 4, 5);
      _tile_dpbf16ps(1, 4, 6);
    }
    _tile_stored(0, o + c, o_stride);
    _tile_stored(1, o + c + 16, o_stride);
  }
}

// O_i [16 rows][DV] (row stride DV floats) += P_i . V for two row groups over `chunks` 32-key
// chunks, 2 x 2 accumulator tiles (both groups, the two tiles of a 32-column block): each V
// tile loaded serves both groups and each P tile two output tiles. P_i's A tile of chunk ch
// at pa_i + 512 ch; V's B tiles from amx_interleave_values.
inline void amx_values_pairs2(float* o0, float* o1, int DV, const uint16_t* pa0,
                              const uint16_t* pa1, const uint16_t* vi, int chunks) {
  const int64_t o_stride = int64_t{DV} * 4;
  const int64_t blocks = DV / 32;
  for (int64_t c = 0; c < DV; c += 32) {
    ATTNKIT_TILE_LOAD(0, o0 + c, o_stride);
    ATTNKIT_TILE_LOAD(1, o0 + c + 16, o_stride);
    ATTNKIT_TILE_LOAD(2, o1 + c, o_stride);
    ATTNKIT_TILE_LOAD(3, o1 + c + 16, o_stride);
    for (int64_t ch = 0; ch < chunks; ++ch) {
      const uint16_t* b = vi + (ch * blocks + c / 32) * 1024;
      ATTNKIT_TILE_LOAD(4, pa0 + 512 * ch, 64);
      ATTNKIT_TILE_LOAD(6, b, 64);
      ATTNKIT_TILE_LOAD(7, b + 512, 64);
      _tile_dpbf16ps(0, 4, 6);
      ATTNKIT_TILE_LOAD(5, pa1 + 512 * ch, 64);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
    _tile_stored(0, o0 + c, o_stride);
    _tile_stored(1, o0 + c + 16, o_stride);
    _tile_stored(2, o1 + c, o_stride);
    _tile_stored(3, o1 + c + 16, o_stride);
  }
}

// exp(x) for probabilities that are rounded to bf16 next: 2^(x log2 e) with a degree-3
// polynomial for 2^f on [-1/2, 1/2] (relative error below 8e-5, against bf16's rounding of
// 2e-3), half the instructions of Ops::exp. x below -88 (and -inf) gives 0; NaN gives NaN.
inline __m512 amx_exp_for_bf16(__m512 x) {
  const __mmask16 tiny = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-88.0f), _CMP_LT_OQ);
  const __m512 t =
      _mm512_mul_ps(_mm512_min_ps(_mm512_set1_ps(88.0f), _mm512_max_ps(_mm512_set1_ps(-88.0f), x)),
                    _mm512_set1_ps(1.44269504088896341f));
  const __m512 n = _mm512_roundscale_ps(t, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_sub_ps(t, n);
  __m512 y = _mm512_set1_ps(0.05517052486538887f);
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(0.24260830879211426f));
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(0.693260908126831f));
  y = _mm512_fmadd_ps(y, f, _mm512_set1_ps(0.9999282360076904f));
  return _mm512_maskz_mov_ps(static_cast<__mmask16>(~tiny), _mm512_scalef_ps(y, n));
}

// Online softmax of one row group over the step's scores st ([keys][16 rows], raw dots):
// scales them (then soft-caps them: cap * tanh(s / cap), where soft_cap > 0) and masks them (key k0
// + j visible to lane r when vb[r] <= k0 + j < ve[r]), moves the exponent base where the maximum
// outgrew it (rescaling those rows of o, DV wide, and their sums), writes the bf16 probabilities
// transposed into the A tiles at pa and adds them to l. kEvenOdd: per 16-key tile t an
// even-column A tile at pa + 1024 t and an odd-column one 512 further; kKeyPairs: per 32-key
// chunk ch one A tile at pa + 512 ch. Keys past `keys` are 0.
template <AmxPLayout L = AmxPLayout::kEvenOdd>
inline void amx_softmax(float* st, int keys, int k0, const int32_t* vb, const int32_t* ve,
                        float scale, float soft_cap, float* m, float* l, float* o, int DV,
                        uint16_t* pa) {
  using V = typename Ops::V;
  using BV = typename Ops::BV;
  const __m512i first = _mm512_loadu_si512(vb);
  const __m512i end = _mm512_loadu_si512(ve);
  const V neg_inf = Ops::set1(-__builtin_inff());
  const V vscale = Ops::set1(scale);
  V mx = neg_inf;
  // Every lane sees every key of the step and there is no soft-cap (most steps of a causal
  // prefill, every step of a decode) and the scale is positive: the raw scores stay in st,
  // their maximum is scaled, and the probabilities below take s scale - base.
  const bool whole = soft_cap <= 0.0f && scale > 0.0f &&
                     _mm512_cmpgt_epi32_mask(first, _mm512_set1_epi32(k0)) == 0 &&
                     _mm512_cmplt_epi32_mask(end, _mm512_set1_epi32(k0 + keys)) == 0;
  if (whole) {
    for (int j = 0; j < keys; ++j) mx = Ops::max(mx, Ops::load(st + int64_t{16} * j));
    mx = Ops::mul(mx, vscale);
  } else {
    for (int j = 0; j < keys; ++j) {
      const __m512i key = _mm512_set1_epi32(k0 + j);
      const __mmask16 seen =
          _mm512_cmpge_epi32_mask(key, first) & _mm512_cmplt_epi32_mask(key, end);
      V x = Ops::mul(Ops::load(st + int64_t{16} * j), vscale);
      if (soft_cap > 0.0f) {
        x = Ops::mul(Ops::set1(soft_cap), Ops::tanh(Ops::mul(x, Ops::set1(1.0f / soft_cap))));
      }
      const V s = _mm512_mask_mov_ps(neg_inf, seen, x);
      Ops::store(st + int64_t{16} * j, s);
      mx = Ops::max(mx, s);
    }
  }
  const V m_old = Ops::load(m);
  // A new base where the maximum outgrew the old one by more than the slack (-inf + slack
  // is -inf: a row's first visible key always sets it).
  const __mmask16 move =
      _mm512_cmp_ps_mask(mx, Ops::add(m_old, Ops::set1(kAmxRescaleSlack)), _CMP_GT_OQ);
  const V m_new = _mm512_mask_mov_ps(m_old, move, mx);
  // Rows that move from a finite base: their accumulators and sums scale by exp(old - new).
  const __mmask16 rescale = move & _mm512_cmp_ps_mask(m_old, neg_inf, _CMP_NEQ_OQ);
  // The running sums: kept where the base stays, 0 where a row's first visible key sets it,
  // times exp(old - new) where it moves from a finite base (below).
  V lsum = _mm512_maskz_mov_ps(static_cast<__mmask16>(~move), Ops::load(l));
  if (rescale != 0) {
    const V alpha = Ops::exp(Ops::sub(m_old, m_new));
    alignas(64) float a[16];
    Ops::store(a, alpha);
    for (int r = 0; r < 16; ++r) {
      if (((rescale >> r) & 1u) == 0) continue;
      const V ar = Ops::set1(a[r]);
      float* orow = o + int64_t{r} * DV;
      for (int64_t c = 0; c < DV; c += 16) Ops::store(orow + c, Ops::mul(Ops::load(orow + c), ar));
    }
    lsum = _mm512_mask_mul_ps(lsum, rescale, Ops::load(l), alpha);
  }
  Ops::store(m, m_new);
  // A row that has seen no key keeps base -inf; exp(-inf - 0) = 0 gives it p = 0.
  const V base =
      _mm512_mask_mov_ps(m_new, _mm512_cmp_ps_mask(m_new, neg_inf, _CMP_EQ_OQ), Ops::zero());
  // The exponent of step key j's probabilities: s - base, or s scale - base for raw scores.
  const auto arg = [&](int j) {
    const V sj = Ops::load(st + int64_t{16} * j);
    return whole ? _mm512_fmsub_ps(sj, vscale, base) : Ops::sub(sj, base);
  };
  // p of step key j for the 16 rows (0 past `keys`), rounded to bf16 in the low half of each
  // 32-bit lane; the sum takes the same rounded values.
  if constexpr (L == AmxPLayout::kKeyPairs) {
    // Per 32-key chunk: A row r holds (p[r][2 i], p[r][2 i + 1]) in dword i.
    const int chunks = (keys + 31) / 32;
    for (int ch = 0; ch < chunks; ++ch) {
      BV pairs[16];
      for (int i = 0; i < 16; ++i) {
        const int j = 32 * ch + 2 * i;
        const V p0 = j < keys ? amx_exp_for_bf16(arg(j)) : Ops::zero();
        const V p1 = j + 1 < keys ? amx_exp_for_bf16(arg(j + 1)) : Ops::zero();
        const __m512i lo = _mm512_cvtepu16_epi32(reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(p0)));
        const __m512i hi = _mm512_slli_epi32(
            _mm512_cvtepu16_epi32(reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(p1))), 16);
        lsum = Ops::add(lsum, _mm512_castsi512_ps(_mm512_slli_epi32(lo, 16)));
        lsum = Ops::add(lsum, _mm512_castsi512_ps(hi));
        pairs[i] = _mm512_or_si512(lo, hi);
      }
      Ops::transpose16_store(pairs, pa + int64_t{512} * ch, 16);
    }
  } else {
    // Per 16-key tile t: A_even row r holds (p[r][j], 0) for its keys j, A_odd (0, p[r][j]).
    const int tiles = (keys + 15) / 16;
    for (int t = 0; t < tiles; ++t) {
      BV even[16], odd[16];
      for (int i = 0; i < 16; ++i) {
        const int j = 16 * t + i;
        const V pj = j < keys ? amx_exp_for_bf16(arg(j)) : Ops::zero();
        const __m512i low =
            _mm512_cvtepu16_epi32(reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(pj)));
        even[i] = low;
        odd[i] = _mm512_slli_epi32(low, 16);
        lsum = Ops::add(lsum, _mm512_castsi512_ps(odd[i]));
      }
      Ops::transpose16_store(even, pa + int64_t{1024} * t, 16);
      Ops::transpose16_store(odd, pa + int64_t{1024} * t + 512, 16);
    }
  }
  Ops::store(l, lsum);
}

// Loads the tile configuration (its whole 64 bytes an operand: GCC's _tile_loadconfig names
// only the first 8, so the stores of the others could be dropped).
inline void amx_configure() {
  AmxTileConfig cfg;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  __asm__ volatile("ldtilecfg %0" ::"m"(cfg));
}

// Q^T of 16 query rows as bf16 pairs ([D / 2 pairs][16 rows], the B tiles of the scores):
// rows[i] is row i's D bf16 values, or null for a padding row (zeros). D % 32 == 0.
inline void amx_transpose_rows(const uint16_t* const* rows, int D, uint16_t* qt) {
  for (int64_t c = 0; c < D; c += 32) {
    typename Ops::BV in[16];
    for (int i = 0; i < 16; ++i) {
      in[i] = rows[i] != nullptr ? Ops::load_bf16_pairs(rows[i] + c) : _mm512_setzero_si512();
    }
    Ops::transpose16_store(in, qt + c * 16, 16);
  }
}

// The 16-key tiles of a step that starts at k0 (a multiple of 16): tile t holds keys
// k0 + 16 t .. k0 + 16 t + 15, `width` bf16 values of each (row_of(key) points at them). A
// tile is read where it lies (ptr[t] its first row, stride[t] the bytes between rows,
// row_stride) when all its keys are in [begin, end) and are consecutive rows of one page
// (`page` keys a page; 0: one contiguous run); else it is staged at staging + 16 width t,
// with zero rows for keys outside [begin, end), which are never read (a sliding window's
// earlier pages may have been freed).
template <class RowOf>
void amx_step_tiles(const RowOf& row_of, int k0, int tiles, int begin, int end, int page,
                    int64_t row_stride, int width, uint16_t* staging, const uint16_t** ptr,
                    int64_t* stride) {
  for (int t = 0; t < tiles; ++t) {
    const int first = k0 + 16 * t;
    if (first >= begin && first + 16 <= end && (page == 0 || first % page + 16 <= page)) {
      ptr[t] = row_of(first);
      stride[t] = row_stride;
      continue;
    }
    uint16_t* dst = staging + int64_t{t} * 16 * width;
    for (int i = 0; i < 16; ++i) {
      uint16_t* row = dst + int64_t{i} * width;
      const auto bytes = sizeof(uint16_t) * static_cast<size_t>(width);
      if (first + i >= begin && first + i < end) {
        std::memcpy(row, row_of(first + i), bytes);
      } else {
        std::memset(row, 0, bytes);
      }
    }
    ptr[t] = dst;
    stride[t] = int64_t{width} * 2;
  }
}
