#pragma once
// The split-KV (flash-decoding) merge pass, per ISA: included by flash_kernel_impl.h inside
// an ISA namespace after `Ops`, kNegInf, element_size and store_row.

// Combines the splits of one merge group with the log-sum-exp rule (and the sink):
//   M = max(max_s m_s, sink), w_s = exp(m_s - M),
//   out = v_scale * sum_s w_s o_s / (sum_s w_s l_s + exp(sink - M)).
inline void merge_splits(const attnkit::PagedAttentionParams& p,
                         const attnkit::cpu::FlashMergeGroup& g, const float* partials,
                         float* tmp) {
  constexpr int L = Ops::kLanes;
  const int group = p.num_heads / p.num_kv_heads;
  const int rows = (g.q_end - g.q_begin) * group;
  const int dv = p.head_size_v;
  const int64_t tok0 = p.query_start_loc[g.seq] + g.q_begin;
  const int64_t osize = element_size(p.q_dtype);
  for (int r = 0; r < rows; ++r) {
    const int t = r / group;
    const int h = g.kv_head * group + r % group;
    // NOLINTNEXTLINE(bugprone-narrowing-conversions): float to float (the check misreads -inf)
    const float sink = p.sinks != nullptr ? p.sinks[h] : kNegInf;
    float m_all = sink;
    bool nan_sum = false;  // a split whose scores were all NaN keeps m = -inf, l = NaN
    for (int s = 0; s < g.num_splits; ++s) {
      const float* part = partials + g.partial_offset + s * g.partial_stride;
      m_all = std::max(m_all, part[int64_t{rows} * dv + r]);
      nan_sum = nan_sum || std::isnan(part[int64_t{rows} * dv + rows + r]);
    }
    std::fill(tmp, tmp + dv, 0.0f);
    float denom = 0.0f;
    if (m_all != kNegInf) {
      for (int s = 0; s < g.num_splits; ++s) {
        const float* part = partials + g.partial_offset + s * g.partial_stride;
        const float m = part[int64_t{rows} * dv + r];
        if (m == kNegInf) continue;
        const float w = std::exp(m - m_all);
        denom += w * part[int64_t{rows} * dv + rows + r];
        const typename Ops::V wv = Ops::set1(w);
        const float* orow = part + int64_t{r} * dv;
        for (int c = 0; c < dv; c += L) {
          Ops::store(tmp + c, Ops::fmadd(wv, Ops::load(orow + c), Ops::load(tmp + c)));
        }
      }
      if (p.sinks != nullptr) denom += std::exp(sink - m_all);
    }
    void* dst = static_cast<char*>(p.out) +
                ((tok0 + t) * p.o_token_stride + int64_t{h} * p.o_head_stride) * osize;
    // NaN in a split (NaN or inf in this request's inputs) shows in the row, as unsplit.
    if (nan_sum) denom = std::numeric_limits<float>::quiet_NaN();
    store_row(p.q_dtype, tmp, denom > 0.0f || std::isnan(denom) ? p.v_scale / denom : 0.0f, dst,
              dv);
  }
}
