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
// Finally each row is normalised into `out`, or (split-KV) its unnormalised output, m and l
// go to the workspace for merge_mla_splits().

// Requires `Ops` and kernels/cpu/row_io.h's helpers (typed, load_row_f32,
// store_row, element_size) in the including namespace.

template <class Kv>
void mla_item(const attnkit::PagedAttentionParams& p, const attnkit::cpu_mla::MlaPlan& plan,
              const attnkit::cpu_mla::MlaWorkItem& item, attnkit::cpu_mla::MlaWorkspace& ws,
              float* scratch) {
  using V = typename Ops::V;
  constexpr int L = Ops::kLanes;
  static_assert(L % 4 == 0 && L <= attnkit::cpu_mla::kMaxLanes);
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

  // Visible keys of each token of the item (attnkit/kernels/mask.h).
  attnkit::KeySpan visible[attnkit::cpu_mla::kMaxTileTokens];
  const int q0 = p.query_start_loc[item.seq];
  const int q_len = p.query_start_loc[item.seq + 1] - q0;
  const int kv_len = p.seq_lens[item.seq];
  for (int t = 0; t < tokens; ++t) {
    const int pos = attnkit::query_position(q_len, kv_len, item.token_begin + t - q0);
    visible[t] = attnkit::visible_keys(plan.mask, pos, kv_len);
  }

  // Queries in fp32, pre-multiplied by scale * k_scale.
  const int64_t qsize = element_size(p.q_dtype);
  const V qscale = Ops::set1(p.scale * p.k_scale);
  for (int r = 0; r < rows; ++r) {
    const int t = item.token_begin + r / H, h = r % H;
    const char* src =
        static_cast<const char*>(p.q) + (t * p.q_token_stride + h * p.q_head_stride) * qsize;
    float* dst = qf + static_cast<int64_t>(r) * D;
    load_row_f32(p.q_dtype, src, dst, D);
    for (int c = 0; c < D; c += L) Ops::store(dst + c, Ops::mul(Ops::load(dst + c), qscale));
    m[r] = kNegInf;
    l[r] = 0.0f;
  }
  std::fill(acc, acc + static_cast<int64_t>(rows) * DV, 0.0f);

  const int64_t ksize = element_size(p.kv_dtype);
  const int32_t* table = p.block_table + static_cast<int64_t>(item.seq) * p.block_table_stride;
  for (int k0 = item.key_begin; k0 < item.key_end; k0 += L) {
    const int n = std::min(L, item.key_end - k0);
    // 1. One read of each latent row, for every head.
    for (int j = 0; j < L; ++j) {
      float* row = kt + j * ld;
      if (j >= n) {
        std::fill(row, row + D, 0.0f);
        continue;
      }
      const int pos = k0 + j;
      const int64_t blk = table[pos / p.block_size];
      const char* src = static_cast<const char*>(p.k_cache) +
                        (blk * p.k_block_stride + (pos % p.block_size) * p.k_token_stride) * ksize;
      for (int c = 0; c < D; c += L) Ops::store(row + c, Ops::load_f32(Kv{}, typed<Kv>(src) + c));
    }
    for (int r0 = 0; r0 < rows; r0 += 4) {
      const int nr = std::min(4, rows - r0);
      // 2. Scores of 4 rows x L keys.
      constexpr int KB = Ops::kScoreKeyBlock;
      static_assert(L % KB == 0);
      V dots[4][L];
      const float* q_rows[4];
      for (int ri = 0; ri < 4; ++ri) {
        // Rows past the end repeat the last row (their results are dropped).
        q_rows[ri] = qf + static_cast<int64_t>(r0 + std::min(ri, nr - 1)) * D;
      }
      for (int j0 = 0; j0 < L; j0 += KB) {
        V a[4][KB];
        for (auto& a_row : a)
          for (V& x : a_row) x = Ops::zero();
        const float* k_rows = kt + j0 * ld;
        for (int c = 0; c < D; c += L) {
          V kv[KB];
          for (int jj = 0; jj < KB; ++jj) kv[jj] = Ops::load(k_rows + jj * ld + c);
          for (int ri = 0; ri < 4; ++ri) {
            const V q = Ops::load(q_rows[ri] + c);
            for (int jj = 0; jj < KB; ++jj) a[ri][jj] = Ops::fmadd(q, kv[jj], a[ri][jj]);
          }
        }
        for (int ri = 0; ri < 4; ++ri)
          for (int jj = 0; jj < KB; ++jj) dots[ri][j0 + jj] = a[ri][jj];
      }
      // 3. Mask and online softmax of each row: its probabilities (0 outside the row's
      // visible lanes [first, end)) and the factor alpha of its running output; a row with
      // no visible key in the tile keeps its output (alpha 1, probabilities 0).
      float alpha[4] = {1.0f, 1.0f, 1.0f, 1.0f};
      float* p_rows = prob;  // [4][L]
      int lo = L, hi = 0;    // keys any row of the block sees
      for (int ri = 0; ri < 4; ++ri) {
        Ops::store(p_rows + int64_t{ri} * L, Ops::zero());
        if (ri >= nr) continue;
        const int r = r0 + ri;
        const int t = r / H;
        const int first = std::max(visible[t].begin, k0) - k0;
        const int end = std::min(visible[t].end, k0 + n) - k0;
        if (first >= end) continue;  // no visible key of this row in the tile
        const V s = Ops::mask_range(Ops::reduce_lanes(dots[ri]), first, end);
        const float m_new = std::max(m[r], Ops::hmax(s));
        alpha[ri] = std::exp(m[r] - m_new);  // 0 on the first visible tile
        const V pv = Ops::exp(Ops::sub(s, Ops::set1(m_new)));
        l[r] = l[r] * alpha[ri] + Ops::hsum(pv);
        m[r] = m_new;
        Ops::store(p_rows + int64_t{ri} * L, pv);
        lo = std::min(lo, first);
        hi = std::max(hi, end);
      }
      if (lo >= hi) continue;  // no row of the block sees a key of this tile
      // 4. Values of the 4 rows together: V is the latent prefix already converted in the
      // tile; each value vector loaded serves every row. Rows past the end (a block of
      // fewer than 4) read row nr - 1 with probability 0 and are not stored.
      constexpr int VB = Ops::kValueBlock;
      float* o_rows[4];
      for (int ri = 0; ri < 4; ++ri) {
        o_rows[ri] = acc + static_cast<int64_t>(r0 + std::min(ri, nr - 1)) * DV;
      }
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

template <class Kv>
void run_mla_typed(const attnkit::PagedAttentionParams& p, const attnkit::cpu_mla::MlaPlan& plan,
                   attnkit::cpu_mla::MlaWorkspace& ws) {
  const int n = static_cast<int>(plan.items.size());
#pragma omp parallel for schedule(dynamic, 1)
  for (int i = 0; i < n; ++i) {
    float* scratch = ws.thread_scratch.data() + omp_get_thread_num() * ws.thread_floats;
    mla_item<Kv>(p, plan, plan.items[static_cast<size_t>(i)], ws, scratch);
  }
  if (plan.partial_rows == 0) return;
#pragma omp parallel for schedule(dynamic, 1)
  for (int i = 0; i < n; ++i) {
    const attnkit::cpu_mla::MlaWorkItem& item = plan.items[static_cast<size_t>(i)];
    if (item.num_splits == 1 || item.split != 0) continue;
    merge_mla_split(p, item, ws,
                    ws.thread_scratch.data() + omp_get_thread_num() * ws.thread_floats);
  }
}

inline void run_mla(const attnkit::PagedAttentionParams& p, const attnkit::cpu_mla::MlaPlan& plan,
                    attnkit::cpu_mla::MlaWorkspace& ws) {
  using attnkit::ScalarType;
  using namespace attnkit::cpu;
  switch (p.kv_dtype) {
    case ScalarType::kFloat32:
      return run_mla_typed<KvF32>(p, plan, ws);
    case ScalarType::kFloat16:
      return run_mla_typed<KvF16>(p, plan, ws);
    case ScalarType::kBFloat16:
      return run_mla_typed<KvBf16>(p, plan, ws);
    case ScalarType::kFp8E4M3:
      return run_mla_typed<KvE4m3>(p, plan, ws);
    default:
      return run_mla_typed<KvE5m2>(p, plan, ws);
  }
}
