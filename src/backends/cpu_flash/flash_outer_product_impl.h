#pragma once
// CPU_FLASH's prefill kernel for the 8-lane fp32-FMA target (AVX2): items of more than
// kOuterMinRows rows per KV head. flash_kernels_avx2.cpp compiles it; items of fewer rows
// take flash_kernel_impl.h's ItemKernel (decode: K and V widened in registers). The same
// work items (flash_plan.h), one KV head of the item after another, over steps of
// kOuterTileKeys (32) keys:
//   1. load_tile: the step's key rows converted to fp32 and transposed, kt[c][j] = k_j[c]
//      (so a vector holds one element of 8 keys), and its value rows converted, vt[j][c];
//   2. per block of up to kBlockRows (6) rows, score_block: s[r][j..j+15] += q[r][c] *
//      kt[c][j..j+15], a broadcast query element times two key vectors (outer products), so
//      no score needs a horizontal reduction;
//   3. softmax_rows: each row's online-softmax update over the step's keys (scale, soft-cap,
//      its visible keys): one running-max update, one rescale factor per 32 keys;
//   4. value_block: o[r][c..c+15] = alpha[r] o[r][c..c+15] + sum_j p[r][j] v_j[c..c+15], a
//      broadcast probability times two value vectors.
// Both products hold 6 rows x 2 vectors = 12 accumulators, 2 loaded vectors and a broadcast
// in AVX2's 16 registers: 8 loads (2 vectors, 6 broadcasts) per 12 FMAs, and 12 independent
// chains cover the FMA latency (4 cycles on 2 ports). The end of the item is
// flash_kernel_impl.h's finish_item_head (the output row normalised with the sink, or the
// split's partial result).
//
// Requires `Ops` (simd_avx2.h), kernels/cpu/row_io.h's helpers, flash_kernel_impl.h
// (finish_item_head, locate_key_rows, ItemKernel) and flash_driver_impl.h (run_plan_with) in
// the including namespace.

// Rows per KV head above which an item takes OuterProductKernel: at 8 rows and fewer (decode)
// a step's K and V conversion would serve too few rows, and ItemKernel widens them in
// registers instead.
inline constexpr int kOuterMinRows = 8;

template <class Kv>
class OuterProductKernel {
  static constexpr int L = Ops::kLanes;
  static constexpr int T = attnkit::cpu::kOuterTileKeys;
  // Rows per register block: 2 x 6 accumulators (see the header comment).
  static constexpr int kBlockRows = 6;
  using V = typename Ops::V;
  using Storage = typename Kv::Storage;
  static_assert(L == 8 && T % 16 == 0, "blocks of 16 keys or columns are two 8-lane vectors");

 public:
  OuterProductKernel(const attnkit::PagedAttentionParams& p, const attnkit::cpu::FlashPlan& plan,
                     float* scratch, float* partials)
      : p_(p), partials_(partials) {
    const attnkit::cpu::ScratchLayout s =
        attnkit::cpu::scratch_layout(plan.max_rows, plan.head_size, plan.head_size_v, T);
    q_ = scratch + s.q;
    o_ = scratch + s.o;
    pr_ = scratch + s.p;
    m_ = scratch + s.m;
    l_ = scratch + s.l;
    alpha_ = scratch + s.alpha;
    kt_ = scratch + s.kf;
    vt_ = scratch + s.vf;
    intervals_ = reinterpret_cast<attnkit::KeySpan*>(scratch + s.iv);
    group_ = p.num_heads / p.num_kv_heads;
    d_ = p.head_size;
    dv_ = p.head_size_v;
    score_scale_ = p.scale * p.k_scale;
    mask_ = attnkit::mask_rule(p);
  }

  void run(const attnkit::cpu::FlashWorkItem& it) {
    const int seq = it.seq;
    const int q_len = p_.query_start_loc[seq + 1] - p_.query_start_loc[seq];
    const int kv_len = p_.seq_lens[seq];
    const int tokens = it.q_end - it.q_begin;
    const int rows = tokens * group_;
    const int64_t tok0 = p_.query_start_loc[seq] + it.q_begin;
    for (int t = 0; t < tokens; ++t) {
      const int pos = attnkit::query_position(q_len, kv_len, it.q_begin + t);
      intervals_[t] = attnkit::visible_keys(mask_, pos, kv_len);
    }
    // Keys [k_begin, k_end): the item's range cut to the union of its rows' visible keys
    // (the first row's begin to the last row's end, see visible_keys_of_rows).
    const int k_begin = std::max(it.k_begin, intervals_[0].begin);
    const int k_end = std::min(it.k_end, intervals_[tokens - 1].end);
    for (int h = 0; h < it.num_kv_heads; ++h) {
      const int kv_head = it.kv_head + h;
      start_head(kv_head, tok0, rows);
      for (int k0 = k_begin; k0 < k_end; k0 += T) {
        const int n = std::min(T, k_end - k0);
        const int next = k0 + T;
        load_tile(seq, kv_head, k0, n, next < k_end ? std::min(T, k_end - next) : 0);
        // Blocks of equal size (6 rows or one fewer) rather than 6s and a short remainder:
        // a block of 2 rows would hold 4 accumulator chains and wait on the FMA latency.
        const int blocks = (rows + kBlockRows - 1) / kBlockRows;
        for (int b = 0, r0 = 0; b < blocks; ++b) {
          const int nr = rows / blocks + (b < rows % blocks ? 1 : 0);
          step_block(r0, nr, k0, n, k_begin, k_end);
          r0 += nr;
        }
      }
      finish_item_head(p_, it, h, tok0, rows, o_, m_, l_, partials_);
    }
  }

 private:
  // The fp32 query rows of KV head kv_head, and the running state of each row reset.
  void start_head(int kv_head, int64_t tok0, int rows) {
    const int64_t qsize = element_size(p_.q_dtype);
    for (int r = 0; r < rows; ++r) {
      const int t = r / group_;
      const int h = kv_head * group_ + r % group_;
      const char* src = static_cast<const char*>(p_.q) +
                        ((tok0 + t) * p_.q_token_stride + int64_t{h} * p_.q_head_stride) * qsize;
      load_row_f32(p_.q_dtype, src, q_ + int64_t{r} * d_, d_);
      m_[r] = kNegInf;
      l_[r] = 0.0f;
      std::fill(o_ + int64_t{r} * dv_, o_ + int64_t{r + 1} * dv_, 0.0f);
    }
  }

  // kt_ and vt_ for keys k0 .. k0+n-1 (kt_'s columns up to the next multiple of 16 zero),
  // and prefetches (into L2) of the n_next rows of the step after: paged rows of one head are
  // strided across pages, which the hardware prefetchers do not follow.
  // Out of line (once per step, so the call costs nothing): where GCC inlined it into the
  // OpenMP region, kernel_prefetch_test could no longer find its prefetches by kernel name.
  [[gnu::noinline]] void load_tile(int seq, int kv_head, int k0, int n, int n_next) {
    const Storage* kp[T];
    const Storage* vp[T];
    locate_key_rows(p_, seq, kv_head, k0, n, kp, vp);
    const int64_t groups = int64_t{(n + 15) / 16} * 2;  // 8-key groups score_block reads
    for (int64_t g = 0; g < groups; ++g) {
      for (int64_t c = 0; c < d_; c += L) {
        V x[L];
#pragma GCC unroll 8
        for (int i = 0; i < L; ++i) {
          const int64_t j = g * L + i;
          x[i] = j < n ? Ops::load_f32(Kv{}, kp[j] + c) : Ops::zero();
        }
        Ops::transpose8(x);
#pragma GCC unroll 8
        for (int i = 0; i < L; ++i) Ops::store(kt_ + (c + i) * T + g * L, x[i]);
      }
    }
    for (int j = 0; j < n; ++j) {
      float* dst = vt_ + int64_t{j} * dv_;
      for (int c = 0; c < dv_; c += L) Ops::store(dst + c, Ops::load_f32(Kv{}, vp[j] + c));
    }
    if (n_next > 0) {
      locate_key_rows(p_, seq, kv_head, k0 + T, n_next, kp, vp);
      const int64_t k_bytes = int64_t{d_} * sizeof(Storage);
      const int64_t v_bytes = int64_t{dv_} * sizeof(Storage);
      for (int j = 0; j < n_next; ++j) {
        for (int64_t b = 0; b < k_bytes; b += 64) {
          attnkit::cpu::prefetch_l2(reinterpret_cast<const char*>(kp[j]) + b);
        }
        for (int64_t b = 0; b < v_bytes; b += 64) {
          attnkit::cpu::prefetch_l2(reinterpret_cast<const char*>(vp[j]) + b);
        }
      }
    }
  }

  struct KeyRange {
    int begin, end;  // keys [begin, end) of the step that row r sees (begin >= end: none)
    bool empty() const { return begin >= end; }
  };
  KeyRange key_range(int r, int k0, int n, int k_begin, int k_end) const {
    const attnkit::KeySpan& iv = intervals_[r / group_];
    return {std::max(iv.begin, k_begin) - k0, std::min({iv.end, k_end, k0 + n}) - k0};
  }

  // Scores, softmax and values of rows r0 .. r0+nr-1 (nr <= kBlockRows) for one step.
  void step_block(int r0, int nr, int k0, int n, int k_begin, int k_end) {
    // The keys any row of the block sees: the products skip the rest (the causal diagonal,
    // a sliding window's start).
    int jb = n, je = 0;
    for (int r = r0; r < r0 + nr; ++r) {
      const KeyRange kr = key_range(r, k0, n, k_begin, k_end);
      if (kr.empty()) continue;
      jb = std::min(jb, std::max(kr.begin, 0));  // begin < 0: the row saw keys before the step
      je = std::max(je, kr.end);
    }
    if (jb >= je) {  // no row of the block sees a key of this step
      for (int r = r0; r < r0 + nr; ++r) alpha_[r] = 1.0f;
      return;
    }
    const int g0 = jb / 16, g1 = (je + 15) / 16;  // 16-key groups [g0, g1)
    switch (nr) {
      case 6:
        return products<6>(r0, g0, g1, k0, n, k_begin, k_end, jb, je);
      case 5:
        return products<5>(r0, g0, g1, k0, n, k_begin, k_end, jb, je);
      case 4:
        return products<4>(r0, g0, g1, k0, n, k_begin, k_end, jb, je);
      case 3:
        return products<3>(r0, g0, g1, k0, n, k_begin, k_end, jb, je);
      case 2:
        return products<2>(r0, g0, g1, k0, n, k_begin, k_end, jb, je);
      default:
        return products<1>(r0, g0, g1, k0, n, k_begin, k_end, jb, je);
    }
  }

  template <int NR>
  void products(int r0, int g0, int g1, int k0, int n, int k_begin, int k_end, int jb, int je) {
    for (int g = g0; g < g1; ++g) score_block<NR>(r0, 16 * g);
    softmax_rows(r0, NR, 16 * g0, 16 * g1, k0, n, k_begin, k_end);
    for (int64_t c0 = 0; c0 < dv_; c0 += 16) value_block<NR>(r0, c0, jb, je);
  }

  // Raw dot products of rows r0 .. r0+NR-1 with keys j0 .. j0+15 of the step, into their
  // rows of pr_. score_block and value_block are inlined into products (GCC called them):
  // a value_block call runs only 32 keys, and without the call's entry and exit the
  // prefill shapes ran 2-3% faster (bench/results/cpu_flash_avx2.md).
  template <int NR>
  [[gnu::always_inline]] void score_block(int r0, int j0) {
    V acc[NR][2];
#pragma GCC unroll 6
    for (int r = 0; r < NR; ++r) acc[r][0] = acc[r][1] = Ops::zero();
    broadcast_fma<NR>(acc, q_ + int64_t{r0} * d_, d_, kt_ + j0, T, 0, d_);
    store_rows<NR>(acc, pr_ + int64_t{r0} * T + j0, T);
  }

  // The block both products share: acc[r] += a[r][i] b_i over i in [i0, i1), for NR rows
  // a[r] (a_stride apart) and 16-float vectors b_i (b_stride apart): per i 2 loads, NR
  // broadcasts and 2 NR FMAs, no reductions.
  template <int NR>
  [[gnu::always_inline]] static void broadcast_fma(V (&acc)[NR][2], const float* a,
                                                   int64_t a_stride, const float* b,
                                                   int64_t b_stride, int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const V ba = Ops::load(b + i * b_stride);
      const V bb = Ops::load(b + i * b_stride + L);
#pragma GCC unroll 6
      for (int r = 0; r < NR; ++r) {
        const V ab = Ops::set1(a[r * a_stride + i]);
        acc[r][0] = Ops::fmadd(ab, ba, acc[r][0]);
        acc[r][1] = Ops::fmadd(ab, bb, acc[r][1]);
      }
    }
  }

  // The NR rows of 16 floats in acc to out (rows stride apart).
  template <int NR>
  [[gnu::always_inline]] static void store_rows(const V (&acc)[NR][2], float* out, int64_t stride) {
#pragma GCC unroll 6
    for (int r = 0; r < NR; ++r) {
      Ops::store(out + r * stride, acc[r][0]);
      Ops::store(out + r * stride + L, acc[r][1]);
    }
  }

  // Online-softmax update of rows r0 .. r0+nr-1 over the scores of keys [jb, je) of the step
  // (whole vectors; lanes a row does not see are masked): scale, soft-cap, mask; new running
  // max, rescale factor and sum; p in place of the scores.
  void softmax_rows(int r0, int nr, int jb, int je, int k0, int n, int k_begin, int k_end) {
    const V vscale = Ops::set1(score_scale_);
    for (int r = r0; r < r0 + nr; ++r) {
      const KeyRange kr = key_range(r, k0, n, k_begin, k_end);
      float* prow = pr_ + int64_t{r} * T;
      if (kr.empty()) {  // this row sees no key of the step
        for (int j = jb; j < je; j += L) Ops::store(prow + j, Ops::zero());
        alpha_[r] = 1.0f;
        continue;
      }
      V s[T / L];
      V mx = Ops::set1(kNegInf);
      for (int64_t v = jb / L; v < je / L; ++v) {
        V x = Ops::mul(Ops::load(prow + v * L), vscale);
        if (p_.soft_cap > 0.0f) {
          const V cap = Ops::set1(p_.soft_cap);
          x = Ops::mul(cap, Ops::tanh(Ops::mul(x, Ops::set1(1.0f / p_.soft_cap))));
        }
        if (kr.begin > v * L || kr.end < (v + 1) * L) {
          x = Ops::mask_range(x, kr.begin - v * L, kr.end - v * L);
        }
        s[v] = x;
        mx = Ops::max(mx, x);
      }
      const float m_old = m_[r];
      const float m_new = std::max(m_old, Ops::hmax(mx));
      const V base = Ops::set1(m_new);
      V sum = Ops::zero();
      for (int64_t v = jb / L; v < je / L; ++v) {
        const V pv = Ops::exp(Ops::sub(s[v], base));
        Ops::store(prow + v * L, pv);
        sum = Ops::add(sum, pv);
      }
      const float alpha = m_new == m_old ? 1.0f : std::exp(m_old - m_new);
      l_[r] = l_[r] * alpha + Ops::hsum(sum);
      m_[r] = m_new;
      alpha_[r] = alpha;
    }
  }

  // o[r][c0 .. c0+15] = alpha[r] o[r][c0 .. c0+15] + sum_{j in [jb, je)} p[r][j] v_j[c0 ..
  // c0+15] for rows r0 .. r0+NR-1.
  template <int NR>
  [[gnu::always_inline]] void value_block(int r0, int64_t c0, int jb, int je) {
    V acc[NR][2];
#pragma GCC unroll 6
    for (int r = 0; r < NR; ++r) {
      const V a = Ops::set1(alpha_[r0 + r]);
      const float* orow = o_ + int64_t{r0 + r} * dv_ + c0;
      acc[r][0] = Ops::mul(Ops::load(orow), a);
      acc[r][1] = Ops::mul(Ops::load(orow + L), a);
    }
    broadcast_fma<NR>(acc, pr_ + int64_t{r0} * T, T, vt_ + c0, dv_, jb, je);
    store_rows<NR>(acc, o_ + int64_t{r0} * dv_ + c0, dv_);
  }

  const attnkit::PagedAttentionParams& p_;
  float* partials_;
  // One KV head's rows at a time: q [rows][d] fp32, o [rows][dv], pr [rows][T] (scores, then
  // p), m, l, alpha [rows]; kt [d][T] (the step's keys transposed), vt [T][dv].
  float *q_, *o_, *pr_, *m_, *l_, *alpha_, *kt_, *vt_;
  attnkit::KeySpan* intervals_;  // [tokens] visible keys of each query token of the item
  int group_ = 1, d_ = 0, dv_ = 0;
  float score_scale_ = 1.0f;
  attnkit::MaskRule mask_;
};

// OuterProductKernel for items of more than kOuterMinRows rows per KV head, ItemKernel for
// the others; both in the same thread scratch (the plan sizes it for either).
template <class Kv>
class OuterProductOrItemKernel {
 public:
  OuterProductOrItemKernel(const attnkit::PagedAttentionParams& p,
                           const attnkit::cpu::FlashPlan& plan, float* scratch, float* partials)
      : outer_(p, plan, scratch, partials),
        item_(p, plan, scratch, partials),
        group_(p.num_heads / p.num_kv_heads) {}
  void run(const attnkit::cpu::FlashWorkItem& it) {
    if ((it.q_end - it.q_begin) * group_ > kOuterMinRows) {
      outer_.run(it);
    } else {
      item_.run(it);
    }
  }

 private:
  OuterProductKernel<Kv> outer_;
  ItemKernel<Kv, false> item_;
  int group_;
};

inline void run_plan_outer_product(const attnkit::PagedAttentionParams& p,
                                   const attnkit::cpu::FlashPlan& plan,
                                   attnkit::cpu::FlashWorkspace& ws) {
  using attnkit::ScalarType;
  using namespace attnkit::cpu;
  switch (p.kv_dtype) {
    case ScalarType::kFloat32:
      return run_plan_with<OuterProductOrItemKernel<KvF32>>(p, plan, ws);
    case ScalarType::kFloat16:
      return run_plan_with<OuterProductOrItemKernel<KvF16>>(p, plan, ws);
    case ScalarType::kBFloat16:
      return run_plan_with<OuterProductOrItemKernel<KvBf16>>(p, plan, ws);
    case ScalarType::kFp8E4M3:
      return run_plan_with<OuterProductOrItemKernel<KvE4m3>>(p, plan, ws);
    default:
      return run_plan_with<OuterProductOrItemKernel<KvE5m2>>(p, plan, ws);
  }
}
