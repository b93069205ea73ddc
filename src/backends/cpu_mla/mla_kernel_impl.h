#pragma once
// The MLA work-item kernel, written once against CPU_FLASH's `Ops` SIMD interface
// (kernels/cpu/simd_<isa>.h) and compiled once per ISA (mla_kernels_<isa>.cpp include it
// inside their own namespace after their target pragma, like CPU_FLASH's kernels).
//
// One item = R = tokens x heads query rows over one key range of ONE latent stream. Keys are
// visited in tiles of Ops::kLanes:
//   1. the tile's latent rows are read from the paged cache ONCE and converted to fp32
//      (stored units; k_scale is folded into the query scale and the output factor);
//   2. scores, a GEMM [R, D] x [D, lanes]: register blocks of 4 rows x Ops::kScoreKeyBlock
//      keys (4 x 4 on AVX-512, 4 x 2 in AVX2's 16 registers), so every loaded query vector
//      serves several keys and every key vector 4 rows; lane j of the folded vector
//      (Ops::reduce_lanes) is key j;
//   3. per-row mask (causal / sliding window) and online softmax (m, l, alpha);
//   4. values o[r] = alpha o[r] + sum_j p[r][j] c_j (V = first head_size_v elements of the
//      latent rows already in the tile), for the 4 rows of the block together in blocks
//      of Ops::kValueBlock vectors: every value vector loaded serves 4 rows.
// While a tile is computed, the latent rows of the next one are prefetched into L2, a share of
// their cache lines with each block of 4 rows, spread over its score loop on the kDot path
// (the paged rows of a request are scattered over blocks, which the hardware prefetchers do
// not follow).
// Finally each row is normalised into `out`, or (split-KV) its unnormalised output, m and l
// go to the workspace for merge_mla_splits().
//
// kDot (bf16 queries and cache, a CPU with avx512_bf16): the same steps with bf16 dot
// products, each instruction two multiply-adds per lane and no conversion of the cache to
// fp32 (bf16 x bf16 products are exact in fp32). Step 1 transposes the tile's latent rows
// into key pairs ([head_size / 2][16 keys] of 32-bit bf16 pairs, so lane j of a scores
// vector is key j and no reduction is needed) and interleaves its value prefix by key pairs;
// step 2 accumulates 4 rows x 4 pair chains (16 independent dot chains cover the
// instruction's latency) and scales the dots afterwards; step 3 rounds p to bf16 and sums
// the rounded values; step 4 adds two keys per dot_bf16 for 4 rows x kValueBlock vectors.

// Requires `Ops` and kernels/cpu/row_io.h's helpers (typed, load_row_f32,
// store_row, element_size) in the including namespace.

// Scores of rows q .. q + nr - 1 ([nr, D] fp32, pre-scaled) against the L keys of the fp32
// tile kt ([L, D]): blocks of 4 rows x Ops::kScoreKeyBlock keys, so every loaded query
// vector serves several keys and every key vector 4 rows; out[ri] lane j is key j. Rows past
// nr repeat the last row (their results are dropped).
inline void mla_scores(const float* q, int nr, int D, const float* kt, typename Ops::V* out) {
  using V = typename Ops::V;
  constexpr int L = Ops::kLanes;
  constexpr int KB = Ops::kScoreKeyBlock;
  static_assert(L % KB == 0);
  const int64_t ld = D;
  V dots[4][L];
  const float* q_rows[4];
  for (int ri = 0; ri < 4; ++ri) q_rows[ri] = q + static_cast<int64_t>(std::min(ri, nr - 1)) * D;
  for (int j0 = 0; j0 < L; j0 += KB) {
    V a[4][KB];
    for (auto& a_row : a)
      for (V& x : a_row) x = Ops::zero();
    const float* k_rows = kt + j0 * ld;
    for (int c = 0; c < D; c += L) {
      V kv[KB];
      for (int jj = 0; jj < KB; ++jj) kv[jj] = Ops::load(k_rows + jj * ld + c);
      for (int ri = 0; ri < 4; ++ri) {
        const V qv = Ops::load(q_rows[ri] + c);
        for (int jj = 0; jj < KB; ++jj) a[ri][jj] = Ops::fmadd(qv, kv[jj], a[ri][jj]);
      }
    }
    for (int ri = 0; ri < 4; ++ri)
      for (int jj = 0; jj < KB; ++jj) dots[ri][j0 + jj] = a[ri][jj];
  }
  for (int ri = 0; ri < 4; ++ri) out[ri] = Ops::reduce_lanes(dots[ri]);
}

// kDot step 1: the latent rows of keys k0 .. k0 + n - 1 from the paged bf16 cache, transposed
// into key pairs at kt16 ([D / 2][16] 32-bit pairs: vector i holds elements 2i, 2i + 1 of
// every key) and their first DV elements interleaved by key pairs at vt16 (pair q, vector v:
// (v_2q[c], v_2q+1[c]) for c = 16 v + lane). Keys past n read key k0's row: their scores are
// masked and their probabilities are 0.
inline void mla_dot_tile(const attnkit::PagedAttentionParams& p, const int32_t* table, int k0,
                         int n, uint16_t* kt16, uint16_t* vt16) {
  using BV = typename Ops::BV;
  const int D = p.head_size, DV = p.head_size_v;
  const uint16_t* rows[16];
  for (int j = 0; j < 16; ++j) {
    const int pos = k0 + (j < n ? j : 0);
    const int64_t blk = table[pos / p.block_size];
    rows[j] = static_cast<const uint16_t*>(p.k_cache) + blk * p.k_block_stride +
              (pos % p.block_size) * p.k_token_stride;
  }
  for (int64_t c = 0; c < D; c += 32) {
    const bool full = c + 32 <= D;  // else 16 elements (8 pairs) are left
    BV key_rows[16];
    for (int j = 0; j < 16; ++j) {
      key_rows[j] = full ? Ops::load_bf16_pairs(rows[j] + c) : Ops::load_bf16_half(rows[j] + c);
    }
    Ops::transpose16_store(key_rows, kt16 + c * 16, full ? 16 : 8);
  }
  const int vecs = DV / 16;
  for (int64_t q = 0; q < 8; ++q) {
    const uint16_t* a = rows[2 * q];
    const uint16_t* b = rows[2 * q + 1];
    uint16_t* dst = vt16 + q * vecs * 32;
    int64_t c = 0;
    for (; c + 32 <= DV; c += 32) {
      BV lo, hi;
      Ops::interleave_bf16(Ops::load_bf16_pairs(a + c), Ops::load_bf16_pairs(b + c), lo, hi);
      std::memcpy(dst + c * 2, &lo, sizeof(BV));
      std::memcpy(dst + c * 2 + 32, &hi, sizeof(BV));
    }
    if (c < DV) {
      BV lo, hi;
      Ops::interleave_bf16(Ops::load_bf16_half(a + c), Ops::load_bf16_half(b + c), lo, hi);
      std::memcpy(dst + c * 2, &lo, sizeof(BV));
    }
  }
}

// The cache lines of the latent rows of one key tile, prefetched into L2 a share at a time.
class TilePrefetch {
 public:
  TilePrefetch(const attnkit::PagedAttentionParams& p, const int32_t* table, int row_blocks)
      : p_(p), table_(table), row_blocks_(row_blocks) {
    const int64_t esize = element_size(p.kv_dtype);
    const int64_t row_bytes = int64_t{p.head_size} * esize;
    // Rows start on a line when the cache and both strides do; else a row spans one more.
    const auto starts = reinterpret_cast<uintptr_t>(p.k_cache) |
                        static_cast<uintptr_t>(p.k_block_stride * esize) |
                        static_cast<uintptr_t>(p.k_token_stride * esize);
    row_lines_ = static_cast<int>((row_bytes + 63) / 64) + (starts % 64 == 0 ? 0 : 1);
    esize_ = esize;
  }

  // The rows of keys k0 .. k0 + n - 1 (n <= kMaxLanes) become the ones to prefetch.
  void start(int k0, int n) {
    const auto* cache = static_cast<const char*>(p_.k_cache);
    for (int j = 0; j < n; ++j) {
      const int pos = k0 + j;
      const int64_t element = int64_t{table_[pos / p_.block_size]} * p_.k_block_stride +
                              int64_t{pos % p_.block_size} * p_.k_token_stride;
      const char* row = cache + element * esize_;
      rows_[j] = row - reinterpret_cast<uintptr_t>(row) % 64;  // its first line
    }
    n_ = n;
    row_ = 0;
    line_ = 0;
    due_ = 0;
    share_ = (n * row_lines_ + row_blocks_ - 1) / row_blocks_;
  }

  // A block of rows begins: its share of the lines (all of them over row_blocks blocks)
  // becomes due.
  void begin_block() { due_ += share_; }

  // Lines due per step, to issue them all over `steps` steps of a loop.
  int per_step(int steps) const { return (due_ + steps - 1) / std::max(steps, 1); }

  // Up to `count` of the lines due. Always inlined, so that the prefetch instructions sit in
  // the kernel itself in every build (kernel_prefetch_test.py looks for them there).
  [[gnu::always_inline]] void issue(int count) {
    for (; count > 0 && due_ > 0 && row_ < n_; --count, --due_) {
      attnkit::cpu::prefetch_l2(rows_[row_] + int64_t{line_} * 64);
      if (++line_ == row_lines_) {
        line_ = 0;
        ++row_;
      }
    }
  }

  // Every line due.
  [[gnu::always_inline]] void issue_due() { issue(due_); }

 private:
  const attnkit::PagedAttentionParams& p_;
  const int32_t* table_;
  int row_blocks_;
  int64_t esize_ = 1;
  int row_lines_ = 1;
  const char* rows_[attnkit::cpu_mla::kMaxLanes] = {};
  int n_ = 0, row_ = 0, line_ = 0, share_ = 0, due_ = 0;
};

// kDot step 2: scores of the bf16 query rows q16 .. + nr - 1 ([nr, D]) against the
// transposed tile, times `scale`; out[ri] lane j is key j. Four pair chains per row (16
// independent dot chains in all) cover the dot instruction's latency.
inline void mla_dot_scores(const uint16_t* q16, int nr, int D, const uint16_t* kt16,
                           typename Ops::V scale, typename Ops::V* out, TilePrefetch& next) {
  using V = typename Ops::V;
  const uint16_t* q_rows[4];
  for (int ri = 0; ri < 4; ++ri) q_rows[ri] = q16 + static_cast<int64_t>(std::min(ri, nr - 1)) * D;
  V a[4][4];
  for (auto& a_row : a)
    for (V& x : a_row) x = Ops::zero();
  const int64_t pairs = D / 2;
  // The block's share of the next tile's lines, spread over the steps (a burst of them at
  // the block's start ran slower in some calls).
  const int per_step = next.per_step(static_cast<int>(pairs / 4));
  int64_t i = 0;
  for (; i + 4 <= pairs; i += 4) {
    next.issue(per_step);
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) {
      const auto kv = Ops::load_bf16_pairs(kt16 + (i + u) * 32);
#pragma GCC unroll 4
      for (int ri = 0; ri < 4; ++ri) {
        a[ri][u] = Ops::dot_bf16(a[ri][u], Ops::broadcast_pair(q_rows[ri] + 2 * (i + u)), kv);
      }
    }
  }
  for (; i < pairs; ++i) {
    const auto kv = Ops::load_bf16_pairs(kt16 + i * 32);
    for (int ri = 0; ri < 4; ++ri) {
      a[ri][0] = Ops::dot_bf16(a[ri][0], Ops::broadcast_pair(q_rows[ri] + 2 * i), kv);
    }
  }
  for (int ri = 0; ri < 4; ++ri) {
    out[ri] = Ops::mul(Ops::add(Ops::add(a[ri][0], a[ri][1]), Ops::add(a[ri][2], a[ri][3])), scale);
  }
}

// kDot step 4 for value vectors c .. c + NB - 1: o[ri] = alpha[ri] o[ri] + sum over key pairs
// q in [q_lo, q_hi) of (p[ri][2q], p[ri][2q+1]) . (v_2q, v_2q+1), the 4 rows of a block
// together. NB is a constant so the accumulators stay in registers and are stored straight
// from them (a run-time count compiled to a `rep movsq` through the stack, 14% of the time).
// Rows past nr alias row nr - 1 and are not stored.
template <int NB>
void mla_dot_value_block(float* const* o_rows, int nr, const float* alpha, const uint16_t* p16,
                         const uint16_t* vt16, int vecs, int c, int q_lo, int q_hi) {
  using V = typename Ops::V;
  constexpr int L = Ops::kLanes;
  V ov[4][NB];
#pragma GCC unroll 4
  for (int ri = 0; ri < 4; ++ri) {
    const V va = Ops::set1(alpha[ri]);
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b)
      ov[ri][b] = Ops::mul(Ops::load(o_rows[ri] + int64_t{c + b} * L), va);
  }
  for (int64_t q = q_lo; q < q_hi; ++q) {
    typename Ops::BV vv[NB];
#pragma GCC unroll 4
    for (int b = 0; b < NB; ++b) vv[b] = Ops::load_bf16_pairs(vt16 + (q * vecs + c + b) * 32);
#pragma GCC unroll 4
    for (int ri = 0; ri < 4; ++ri) {
      const auto pb = Ops::broadcast_pair(p16 + int64_t{ri} * L + 2 * q);
#pragma GCC unroll 4
      for (int b = 0; b < NB; ++b) ov[ri][b] = Ops::dot_bf16(ov[ri][b], pb, vv[b]);
    }
  }
#pragma GCC unroll 4
  for (int ri = 0; ri < 4; ++ri) {
    if (ri < nr) {
#pragma GCC unroll 4
      for (int b = 0; b < NB; ++b) Ops::store(o_rows[ri] + int64_t{c + b} * L, ov[ri][b]);
    }
  }
}

// kDot step 4 over all DV / L value vectors: blocks of Ops::kValueBlock, then the remainder.
inline void mla_dot_values(float* const* o_rows, int nr, const float* alpha, const uint16_t* p16,
                           const uint16_t* vt16, int DV, int q_lo, int q_hi) {
  constexpr int VB = Ops::kValueBlock;
  static_assert(VB <= 4);
  const int vecs = DV / Ops::kLanes;
  int c = 0;
  for (; c + VB <= vecs; c += VB) {
    mla_dot_value_block<VB>(o_rows, nr, alpha, p16, vt16, vecs, c, q_lo, q_hi);
  }
  switch (vecs - c) {
    case 3:
      return mla_dot_value_block<3>(o_rows, nr, alpha, p16, vt16, vecs, c, q_lo, q_hi);
    case 2:
      return mla_dot_value_block<2>(o_rows, nr, alpha, p16, vt16, vecs, c, q_lo, q_hi);
    case 1:
      return mla_dot_value_block<1>(o_rows, nr, alpha, p16, vt16, vecs, c, q_lo, q_hi);
    default:
      return;
  }
}

template <class Kv, bool kDot>
void mla_item(const attnkit::PagedAttentionParams& p, const attnkit::cpu_mla::MlaPlan& plan,
              const attnkit::cpu_mla::MlaWorkItem& item, attnkit::cpu_mla::MlaWorkspace& ws,
              float* scratch) {
  using V = typename Ops::V;
  constexpr int L = Ops::kLanes;
  static_assert(L % 4 == 0 && L <= attnkit::cpu_mla::kMaxLanes);
  static_assert(!kDot || (Ops::kHasBf16Dot && L == 16 && std::is_same_v<Kv, attnkit::cpu::KvBf16>));
  const int H = p.num_heads, D = p.head_size, DV = p.head_size_v;
  const int tokens = item.token_end - item.token_begin;
  const int rows = tokens * H;
  // Row stride (floats) of qf and kt, widened once: the offsets below are formed in 64 bits.
  const int64_t ld = D;
  float* qf = scratch;                               // [rows, D]
  float* acc = qf + rows * ld;                       // [rows, DV]
  float* kt = acc + int64_t{rows} * DV;              // [L, D]
  float* prob = kt + L * ld;                         // [4, L]: the probabilities of a block of rows
  float* m = prob + int64_t{std::max(rows, 4)} * L;  // [rows]
  float* l = m + rows;                               // [rows]
  // kDot: qf holds the raw bf16 query rows, kt the transposed key tile ([D / 2][L] pairs)
  // followed by the interleaved value tile ([L / 2 pairs][DV / L vectors][32]), prob the
  // bf16 probabilities [4][L] (8 D + 8 DV <= L D floats, as DV <= D).
  auto* q16 = reinterpret_cast<uint16_t*>(qf);
  auto* kt16 = reinterpret_cast<uint16_t*>(kt);
  uint16_t* vt16 = kt16 + int64_t{L} * D;
  auto* p16 = reinterpret_cast<uint16_t*>(prob);

  // Visible keys of each token of the item (attnkit/kernels/mask.h).
  attnkit::KeySpan visible[attnkit::cpu_mla::kMaxTileTokens];
  const int q0 = p.query_start_loc[item.seq];
  const int q_len = p.query_start_loc[item.seq + 1] - q0;
  const int kv_len = p.seq_lens[item.seq];
  for (int t = 0; t < tokens; ++t) {
    const int pos = attnkit::query_position(q_len, kv_len, item.token_begin + t - q0);
    visible[t] = attnkit::visible_keys(plan.mask, pos, kv_len);
  }

  // Queries in fp32, pre-multiplied by scale * k_scale (kDot: raw bf16, the dots scaled).
  const int64_t qsize = element_size(p.q_dtype);
  const V qscale = Ops::set1(p.scale * p.k_scale);
  for (int r = 0; r < rows; ++r) {
    const int t = item.token_begin + r / H, h = r % H;
    const char* src =
        static_cast<const char*>(p.q) + (t * p.q_token_stride + h * p.q_head_stride) * qsize;
    if constexpr (kDot) {
      std::memcpy(q16 + static_cast<int64_t>(r) * D, src, static_cast<size_t>(D) * 2);
    } else {
      float* dst = qf + static_cast<int64_t>(r) * D;
      load_row_f32(p.q_dtype, src, dst, D);
      for (int c = 0; c < D; c += L) Ops::store(dst + c, Ops::mul(Ops::load(dst + c), qscale));
    }
    m[r] = kNegInf;
    l[r] = 0.0f;
  }
  std::fill(acc, acc + static_cast<int64_t>(rows) * DV, 0.0f);

  const int64_t ksize = element_size(p.kv_dtype);
  const int32_t* table = p.block_table + static_cast<int64_t>(item.seq) * p.block_table_stride;
  TilePrefetch next_tile(p, table, (rows + 3) / 4);
  for (int k0 = item.key_begin; k0 < item.key_end; k0 += L) {
    const int n = std::min(L, item.key_end - k0);
    next_tile.start(k0 + L, std::max(0, std::min(L, item.key_end - k0 - L)));
    // 1. One read of each latent row, for every head.
    if constexpr (kDot) {
      mla_dot_tile(p, table, k0, n, kt16, vt16);
    } else {
      for (int j = 0; j < L; ++j) {
        float* row = kt + j * ld;
        if (j >= n) {
          std::fill(row, row + D, 0.0f);
          continue;
        }
        const int pos = k0 + j;
        const int64_t blk = table[pos / p.block_size];
        const char* src =
            static_cast<const char*>(p.k_cache) +
            (blk * p.k_block_stride + (pos % p.block_size) * p.k_token_stride) * ksize;
        for (int c = 0; c < D; c += L) Ops::store(row + c, Ops::load_f32(Kv{}, typed<Kv>(src) + c));
      }
    }
    for (int r0 = 0; r0 < rows; r0 += 4) {
      const int nr = std::min(4, rows - r0);
      next_tile.begin_block();
      // 2. Scores of 4 rows x L keys: scores[ri] lane j = row r0 + ri, key k0 + j.
      V scores[4];
      if constexpr (kDot) {
        mla_dot_scores(q16 + static_cast<int64_t>(r0) * D, nr, D, kt16, qscale, scores, next_tile);
      } else {
        mla_scores(qf + static_cast<int64_t>(r0) * D, nr, D, kt, scores);
      }
      next_tile.issue_due();  // the block's share (kDot: what the score loop's steps left)
      // 3. Mask and online softmax of each row: its probabilities (0 outside the row's
      // visible lanes [first, end)) and the factor alpha of its running output; a row with
      // no visible key in the tile keeps its output (alpha 1, probabilities 0).
      float alpha[4] = {1.0f, 1.0f, 1.0f, 1.0f};
      float* p_rows = prob;  // [4][L] (kDot: p16, bf16)
      int lo = L, hi = 0;    // keys any row of the block sees
      for (int ri = 0; ri < 4; ++ri) {
        if constexpr (kDot) {
          std::memset(p16 + int64_t{ri} * L, 0, sizeof(uint16_t) * L);
        } else {
          Ops::store(p_rows + int64_t{ri} * L, Ops::zero());
        }
        if (ri >= nr) continue;
        const int r = r0 + ri;
        const int t = r / H;
        const int first = std::max(visible[t].begin, k0) - k0;
        const int end = std::min(visible[t].end, k0 + n) - k0;
        if (first >= end) continue;  // no visible key of this row in the tile
        const V s = Ops::mask_range(scores[ri], first, end);
        const float m_new = std::max(m[r], Ops::hmax(s));
        alpha[ri] = std::exp(m[r] - m_new);  // 0 on the first visible tile
        V pv = Ops::exp(Ops::sub(s, Ops::set1(m_new)));
        if constexpr (kDot) {
          // The values are weighted by the bf16-rounded p; the sum uses the same numbers.
          Ops::store_bf16(p16 + int64_t{ri} * L, pv);
          pv = Ops::round_to_bf16(pv);
        } else {
          Ops::store(p_rows + int64_t{ri} * L, pv);
        }
        l[r] = l[r] * alpha[ri] + Ops::hsum(pv);
        m[r] = m_new;
        lo = std::min(lo, first);
        hi = std::max(hi, end);
      }
      if (lo >= hi) continue;  // no row of the block sees a key of this tile
      // 4. Values of the 4 rows together: V is the latent prefix already converted in the
      // tile; each value vector loaded serves every row. Rows past the end (a block of
      // fewer than 4) read row nr - 1 with probability 0 and are not stored.
      float* o_rows[4];
      for (int ri = 0; ri < 4; ++ri) {
        o_rows[ri] = acc + static_cast<int64_t>(r0 + std::min(ri, nr - 1)) * DV;
      }
      if constexpr (kDot) {
        mla_dot_values(o_rows, nr, alpha, p16, vt16, DV, lo / 2, (hi + 1) / 2);
        continue;
      }
      constexpr int VB = Ops::kValueBlock;
      for (int c = 0; c < DV; c += VB * L) {
        const int nb = std::min(VB, (DV - c) / L);
        V ov[4][VB];
        for (int ri = 0; ri < 4; ++ri) {
          const V va = Ops::set1(alpha[ri]);
          for (int b = 0; b < VB; ++b) {
            ov[ri][b] =
                b < nb ? Ops::mul(Ops::load(o_rows[ri] + c + int64_t{b} * L), va) : Ops::zero();
          }
        }
        for (int j = lo; j < hi; ++j) {
          const float* vrow = kt + j * ld + c;
          V vj[VB];
          for (int b = 0; b < VB; ++b)
            vj[b] = b < nb ? Ops::load(vrow + int64_t{b} * L) : Ops::zero();
          for (int ri = 0; ri < 4; ++ri) {
            const V pj = Ops::set1(p_rows[ri * L + j]);
            for (int b = 0; b < VB; ++b) ov[ri][b] = Ops::fmadd(pj, vj[b], ov[ri][b]);
          }
        }
        for (int ri = 0; ri < nr; ++ri) {  // rows past the end alias row nr - 1: not stored
          for (int b = 0; b < nb; ++b) Ops::store(o_rows[ri] + c + int64_t{b} * L, ov[ri][b]);
        }
      }
    }
  }

  if (item.num_splits == 1) {
    for (int r = 0; r < rows; ++r) {
      const int t = item.token_begin + r / H, h = r % H;
      char* dst = static_cast<char*>(p.out) + (t * p.o_token_stride + h * p.o_head_stride) * qsize;
      // A row that saw no key writes zeros (acc is zero there).
      const float factor = l[r] > 0.0f ? p.k_scale / l[r] : 0.0f;
      store_row(p.q_dtype, acc + static_cast<int64_t>(r) * DV, factor, dst, DV);
    }
    return;
  }
  for (int r = 0; r < rows; ++r) {
    const int64_t pr = item.partial_row + r;
    std::copy(acc + static_cast<int64_t>(r) * DV, acc + static_cast<int64_t>(r + 1) * DV,
              ws.partial_out.data() + pr * DV);
    ws.partial_ml[static_cast<size_t>(2 * pr)] = m[r];
    ws.partial_ml[static_cast<size_t>(2 * pr + 1)] = l[r];
  }
}

// Combines the chunks of one split tile (`first` is its split-0 item):
//   M = max_s m_s, w_s = exp(m_s - M), out = k_scale * sum_s w_s o_s / sum_s w_s l_s.
inline void merge_mla_split(const attnkit::PagedAttentionParams& p,
                            const attnkit::cpu_mla::MlaWorkItem& first,
                            const attnkit::cpu_mla::MlaWorkspace& ws, float* tmp) {
  using V = typename Ops::V;
  constexpr int L = Ops::kLanes;
  const int H = p.num_heads, DV = p.head_size_v;
  const int rows = (first.token_end - first.token_begin) * H;
  const int64_t qsize = element_size(p.q_dtype);
  for (int r = 0; r < rows; ++r) {
    float big = kNegInf;
    for (int s = 0; s < first.num_splits; ++s) {
      big = std::max(
          big, ws.partial_ml[static_cast<size_t>(2 * (first.partial_row + int64_t{s} * rows + r))]);
    }
    std::fill(tmp, tmp + DV, 0.0f);
    float denom = 0.0f;
    if (big != kNegInf) {
      for (int s = 0; s < first.num_splits; ++s) {
        const int64_t pr = first.partial_row + int64_t{s} * rows + r;
        const float ms = ws.partial_ml[static_cast<size_t>(2 * pr)];
        if (ms == kNegInf) continue;
        const float w = std::exp(ms - big);
        denom += w * ws.partial_ml[static_cast<size_t>(2 * pr + 1)];
        const V vw = Ops::set1(w);
        const float* o = ws.partial_out.data() + pr * DV;
        for (int c = 0; c < DV; c += L) {
          Ops::store(tmp + c, Ops::fmadd(vw, Ops::load(o + c), Ops::load(tmp + c)));
        }
      }
    }
    const int t = first.token_begin + r / H, h = r % H;
    char* dst = static_cast<char*>(p.out) + (t * p.o_token_stride + h * p.o_head_stride) * qsize;
    store_row(p.q_dtype, tmp, denom > 0.0f ? p.k_scale / denom : 0.0f, dst, DV);
  }
}

// Runs kItem (an item kernel: mla_item or mla_amx_item) on every item of the plan, each
// thread in its own scratch (kernels/cpu/thread_scratch.h, kept across calls), then merges
// the split tiles.
template <auto kItem>
void run_mla_items(const attnkit::PagedAttentionParams& p, const attnkit::cpu_mla::MlaPlan& plan,
                   attnkit::cpu_mla::MlaWorkspace& ws) {
  const int n = static_cast<int>(plan.items.size());
  bool no_memory = false;
#pragma omp parallel reduction(|| : no_memory)
  {
    float* scratch = attnkit::cpu::thread_scratch(ws.thread_floats);
    no_memory = scratch == nullptr;
#pragma omp for schedule(dynamic, 1)
    for (int i = 0; i < n; ++i) {
      if (scratch != nullptr) kItem(p, plan, plan.items[static_cast<size_t>(i)], ws, scratch);
    }
    if (plan.partial_rows > 0) {
#pragma omp for schedule(dynamic, 1)
      for (int i = 0; i < n; ++i) {
        const attnkit::cpu_mla::MlaWorkItem& item = plan.items[static_cast<size_t>(i)];
        if (scratch == nullptr || item.num_splits == 1 || item.split != 0) continue;
        merge_mla_split(p, item, ws, scratch);
      }
    }
  }
  if (no_memory) {
    throw attnkit::Error(attnkit::ErrorCode::kOutOfMemory,
                         fmt::format("cannot allocate {} bytes of CPU_MLA scratch per thread",
                                     ws.thread_floats * 4));
  }
}

template <class Kv, bool kDot>
void run_mla_typed(const attnkit::PagedAttentionParams& p, const attnkit::cpu_mla::MlaPlan& plan,
                   attnkit::cpu_mla::MlaWorkspace& ws) {
  run_mla_items<&mla_item<Kv, kDot>>(p, plan, ws);
}

// bf16_dot: the CPU has avx512_bf16 (only the AVX-512 target has the instruction).
inline void run_mla(const attnkit::PagedAttentionParams& p, const attnkit::cpu_mla::MlaPlan& plan,
                    attnkit::cpu_mla::MlaWorkspace& ws, bool bf16_dot) {
  using attnkit::ScalarType;
  using namespace attnkit::cpu;
  switch (p.kv_dtype) {
    case ScalarType::kFloat32:
      return run_mla_typed<KvF32, false>(p, plan, ws);
    case ScalarType::kFloat16:
      return run_mla_typed<KvF16, false>(p, plan, ws);
    case ScalarType::kBFloat16:
      // bf16 x bf16 products are exact in fp32, so the dot instruction loses nothing.
      if constexpr (Ops::kHasBf16Dot && Ops::kLanes == 16) {
        if (bf16_dot && p.q_dtype == ScalarType::kBFloat16) {
          return run_mla_typed<KvBf16, true>(p, plan, ws);
        }
      }
      return run_mla_typed<KvBf16, false>(p, plan, ws);
    case ScalarType::kFp8E4M3:
      return run_mla_typed<KvE4m3, false>(p, plan, ws);
    default:
      return run_mla_typed<KvE5m2, false>(p, plan, ws);
  }
}
