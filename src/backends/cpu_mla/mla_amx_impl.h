#pragma once
// CPU_MLA on AMX tiles: bf16 queries and a bf16 latent cache on a CPU with AMX-BF16
// (mla_kernels_amx.cpp compiles this for AVX-512 + AMX; mla_attention.cpp picks it).
//
// The item is the same as mla_kernel_impl.h's (tokens x heads query rows over one key range
// of one latent stream); its rows are cut into groups of 16 (one tile's rows) and its keys
// visited in steps of kAmxKeys = 64, four 16-key tiles. Per step:
//   1. the latent rows are read where they lie: a 16-key tile is 16 rows of one page, loaded
//      by the tile loads straight from it (else, where its keys cross a page or the item's
//      end, from a staging copy, zero rows past the end); K and V are the same rows;
//   2. per row group, scores transposed: S^T [16 keys x 16 rows] = K [16 x D] . Q^T, the
//      D / 32 tile products accumulating in a tile register (Q^T is laid out once per item
//      as bf16 pairs [D / 2][16 rows]);
//   3. the online softmax runs with a row in each lane (no horizontal reductions): mask,
//      running maximum, p = exp(s - base) rounded to bf16 (the sum takes the same rounded
//      values), transposed into two A tiles per 16 keys: p in the first bf16 of each pair
//      (zeros in the second), and p in the second;
//   4. O [16 rows x DV] += P . V with V's rows as the B tiles as they are (no interleaving
//      by key pairs): a B row holds 32 consecutive columns of one key, so the first A tile
//      takes its even columns and the second its odd ones, into two 16-column tiles of O
//      (O keeps its columns in that order, restored once per item).
// The exponent base of a row moves only when the step's maximum exceeds it by more than
// kAmxRescaleSlack (e^8 ~ 3000: p and the sums stay far from fp32's range), so the
// accumulators are rescaled a few times per item instead of at every step; the output is
// O / l whatever the base, and split chunks pass the base on as their m for the merge.
// No software prefetch: the tiles read each page in order, which the hardware prefetchers
// follow (prefetching the next step's rows, spread or in a burst, measured slower).
//
// Requires `Ops` (simd_avx512.h), kernels/cpu/row_io.h's helpers and mla_kernel_impl.h
// (merge_mla_split) in the including namespace, and mla_amx_layout.h included before it
// (outside the ISA namespace).

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
      ATTNKIT_TILE_LOAD(2, pa + 1024 * t, 64);
      ATTNKIT_TILE_LOAD(3, pa + 1024 * t + 512, 64);
      ATTNKIT_TILE_LOAD(4, kv[t] + c, kv_stride[t]);
      _tile_dpbf16ps(0, 2, 4);
      _tile_dpbf16ps(1, 3, 4);
    }
    _tile_stored(0, o + c, o_stride);
    _tile_stored(1, o + c + 16, o_stride);
  }
}

// Puts the columns of `rows` rows of O (DV floats each) back in order: of each 32, positions
// 0-15 held the even columns and 16-31 the odd ones.
inline void amx_restore_columns(float* o, int rows, int DV) {
  const __m512i first = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
  const __m512i second =
      _mm512_setr_epi32(8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
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

// Online softmax of one row group over the step's scores st ([keys][16 rows], raw dots):
// scales and masks them (key k0 + j visible to lane r when vb[r] <= k0 + j < ve[r]), moves
// the exponent base where the maximum outgrew it (rescaling those rows of o, DV wide, and
// their sums), writes the bf16 probabilities transposed into the A tiles at pa (tile t's
// even-column one at pa + 1024 t, its odd-column one 512 further; keys past `keys` are 0)
// and adds them to l.
inline void amx_softmax(float* st, int keys, int k0, const int32_t* vb, const int32_t* ve,
                        float scale, float* m, float* l, float* o, int DV, uint16_t* pa) {
  using V = typename Ops::V;
  using BV = typename Ops::BV;
  const __m512i first = _mm512_loadu_si512(vb);
  const __m512i end = _mm512_loadu_si512(ve);
  const V neg_inf = Ops::set1(-__builtin_inff());
  const V vscale = Ops::set1(scale);
  V mx = neg_inf;
  for (int j = 0; j < keys; ++j) {
    const __m512i key = _mm512_set1_epi32(k0 + j);
    const __mmask16 seen = _mm512_cmpge_epi32_mask(key, first) & _mm512_cmplt_epi32_mask(key, end);
    const V s = _mm512_mask_mul_ps(neg_inf, seen, Ops::load(st + 16 * j), vscale);
    Ops::store(st + 16 * j, s);
    mx = Ops::max(mx, s);
  }
  const V m_old = Ops::load(m);
  // A new base where the maximum outgrew the old one by more than the slack (-inf + slack
  // is -inf: a row's first visible key always sets it).
  const __mmask16 move =
      _mm512_cmp_ps_mask(mx, Ops::add(m_old, Ops::set1(kAmxRescaleSlack)), _CMP_GT_OQ);
  const V m_new = _mm512_mask_mov_ps(m_old, move, mx);
  // Rows that move from a finite base: their accumulators and sums scale by exp(old - new).
  const __mmask16 rescale = move & _mm512_cmp_ps_mask(m_old, neg_inf, _CMP_NEQ_OQ);
  V lsum = _mm512_maskz_mul_ps(static_cast<__mmask16>(~move), Ops::load(l), Ops::set1(1.0f));
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
  // Per 16-key tile t: A_even row r holds (p[r][j], 0) for its keys j, A_odd (0, p[r][j]).
  const int tiles = (keys + 15) / 16;
  for (int t = 0; t < tiles; ++t) {
    BV even[16], odd[16];
    for (int i = 0; i < 16; ++i) {
      const int j = 16 * t + i;
      const V pj = j < keys ? Ops::exp(Ops::sub(Ops::load(st + 16 * j), base)) : Ops::zero();
      // p rounded to bf16 in the low half of each 32-bit lane; the sum takes the same values.
      const __m512i low = _mm512_cvtepu16_epi32(reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(pj)));
      even[i] = low;
      odd[i] = _mm512_slli_epi32(low, 16);
      lsum = Ops::add(lsum, _mm512_castsi512_ps(odd[i]));
    }
    Ops::transpose16_store(even, pa + 1024 * t, 16);
    Ops::transpose16_store(odd, pa + 1024 * t + 512, 16);
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

inline void mla_amx_item(const attnkit::PagedAttentionParams& p,
                         const attnkit::cpu_mla::MlaPlan& plan,
                         const attnkit::cpu_mla::MlaWorkItem& item,
                         attnkit::cpu_mla::MlaWorkspace& ws, float* scratch) {
  using attnkit::cpu_mla::kAmxKeys;
  using attnkit::cpu_mla::kAmxRows;
  const int H = p.num_heads, D = p.head_size, DV = p.head_size_v;
  const int tokens = item.token_end - item.token_begin;
  const int rows = tokens * H;
  const int groups = (rows + kAmxRows - 1) / kAmxRows;
  const attnkit::cpu_mla::MlaAmxLayout lay = attnkit::cpu_mla::mla_amx_layout(groups, D, DV);
  // 64-byte aligned start (the workspace vector is only float-aligned).
  float* base = scratch + ((64 - reinterpret_cast<uintptr_t>(scratch) % 64) % 64) / 4;
  auto* qt = reinterpret_cast<uint16_t*>(base + lay.qt);
  float* o = base + lay.o;
  float* st = base + lay.st;
  auto* pa = reinterpret_cast<uint16_t*>(base + lay.pa);
  auto* ks = reinterpret_cast<uint16_t*>(base + lay.ks);
  float* m = base + lay.m;
  float* l = base + lay.l;
  auto* vb = reinterpret_cast<int32_t*>(base + lay.vis);
  int32_t* ve = vb + int64_t{groups} * kAmxRows;

  // Each row's visible keys, cut to the item's range (padding rows see none).
  const int q0 = p.query_start_loc[item.seq];
  const int q_len = p.query_start_loc[item.seq + 1] - q0;
  const int kv_len = p.seq_lens[item.seq];
  for (int r = 0; r < groups * kAmxRows; ++r) {
    vb[r] = ve[r] = 0;
    m[r] = -__builtin_inff();
    l[r] = 0.0f;
    if (r >= rows) continue;
    const int pos = attnkit::query_position(q_len, kv_len, item.token_begin + r / H - q0);
    const attnkit::KeySpan span = attnkit::visible_keys(plan.mask, pos, kv_len);
    vb[r] = std::max(span.begin, item.key_begin);
    ve[r] = std::min(span.end, item.key_end);
  }
  std::fill(o, o + int64_t{groups} * kAmxRows * DV, 0.0f);

  // Q^T of each row group as bf16 pairs (rows past the item's are zeros).
  const auto* qbase = static_cast<const uint16_t*>(p.q);
  for (int g = 0; g < groups; ++g) {
    for (int64_t c = 0; c < D; c += 32) {
      typename Ops::BV in[kAmxRows];
      for (int i = 0; i < kAmxRows; ++i) {
        const int r = g * kAmxRows + i;
        in[i] = _mm512_setzero_si512();
        if (r >= rows) continue;
        const int64_t t = item.token_begin + r / H, h = r % H;
        in[i] = Ops::load_bf16_pairs(qbase + t * p.q_token_stride + h * p.q_head_stride + c);
      }
      Ops::transpose16_store(in, qt + int64_t{g} * D * kAmxRows + c * kAmxRows, kAmxRows);
    }
  }

  amx_configure();
  const auto* cache = static_cast<const uint16_t*>(p.k_cache);
  const int32_t* table = p.block_table + int64_t{item.seq} * p.block_table_stride;
  const auto row_of = [&](int key) {
    return cache + int64_t{table[key / p.block_size]} * p.k_block_stride +
           int64_t{key % p.block_size} * p.k_token_stride;
  };
  const float scale = p.scale * p.k_scale;
  // Steps start on a multiple of 16 keys so that a tile's rows can be one page's. Keys
  // outside [key_begin, key_end) are never read (a sliding window's earlier pages may be
  // freed): a tile holding any of them is staged with zero rows there, and masked.
  for (int k0 = item.key_begin - item.key_begin % 16; k0 < item.key_end; k0 += kAmxKeys) {
    const int keys = std::min(kAmxKeys, item.key_end - k0);
    const int subs = (keys + 15) / 16;
    const uint16_t* ka[4];
    int64_t ka_stride[4];
    for (int s = 0; s < subs; ++s) {
      const int first = k0 + 16 * s;
      if (first >= item.key_begin && first + 16 <= item.key_end &&
          first % p.block_size + 16 <= p.block_size) {
        ka[s] = row_of(first);
        ka_stride[s] = p.k_token_stride * 2;
        continue;
      }
      uint16_t* dst = ks + int64_t{s} * 16 * D;
      for (int i = 0; i < 16; ++i) {
        uint16_t* row = dst + int64_t{i} * D;
        if (first + i >= item.key_begin && first + i < item.key_end) {
          std::memcpy(row, row_of(first + i), sizeof(uint16_t) * static_cast<size_t>(D));
        } else {
          std::memset(row, 0, sizeof(uint16_t) * static_cast<size_t>(D));
        }
      }
      ka[s] = dst;
      ka_stride[s] = int64_t{D} * 2;
    }
    for (int g = 0; g < groups; ++g) {
      const int64_t r0 = int64_t{g} * kAmxRows;
      amx_scores(ka, ka_stride, subs, qt + r0 * D, D, st);
      amx_softmax(st, keys, k0, vb + r0, ve + r0, scale, m + r0, l + r0, o + r0 * DV, DV, pa);
      amx_values(o + r0 * DV, DV, pa, ka, ka_stride, subs);
    }
  }
  _tile_release();
  amx_restore_columns(o, rows, DV);

  const int64_t qsize = element_size(p.q_dtype);
  if (item.num_splits == 1) {
    for (int r = 0; r < rows; ++r) {
      const int64_t t = item.token_begin + r / H, h = r % H;
      char* dst = static_cast<char*>(p.out) + (t * p.o_token_stride + h * p.o_head_stride) * qsize;
      // A row that saw no key writes zeros (o is zero there).
      const float factor = l[r] > 0.0f ? p.k_scale / l[r] : 0.0f;
      store_row(p.q_dtype, o + int64_t{r} * DV, factor, dst, DV);
    }
    return;
  }
  for (int r = 0; r < rows; ++r) {
    const int64_t pr = item.partial_row + r;
    std::copy(o + int64_t{r} * DV, o + int64_t{r + 1} * DV, ws.partial_out.data() + pr * DV);
    ws.partial_ml[static_cast<size_t>(2 * pr)] = m[r];
    ws.partial_ml[static_cast<size_t>(2 * pr + 1)] = l[r];
  }
}

inline void run_mla_amx(const attnkit::PagedAttentionParams& p,
                        const attnkit::cpu_mla::MlaPlan& plan, attnkit::cpu_mla::MlaWorkspace& ws) {
  run_mla_items<&mla_amx_item>(p, plan, ws);
}
