#pragma once
// The flash-attention work-item kernel, written once against an `Ops` SIMD interface
// (simd_<isa>.h) and compiled once per ISA: each flash_kernels_<isa>.cpp defines its own
// namespace, sets its target, includes its Ops and then this file, so every function here
// has internal per-ISA identity and the code for one ISA never leaks into another.
//
// One work item (see flash_plan.h) = R rows (query tokens of a tile x query heads of one KV
// head) over a key range. Keys are visited in tiles of Ops::kLanes keys (16, two vectors,
// on the 8-lane direct decode path: kDirectTileKeys):
//   1. scores: for each row, kLanes dot products q . k_j accumulated along the head
//      dimension, folded into one vector (lane j = key j) by Ops::reduce_lanes;
//      scale, soft-cap and mask are applied to that vector;
//   2. online softmax per row: running max m, running sum l, rescale factor alpha;
//   3. values: o[r] = alpha[r] o[r] + sum_j p[r][j] v_j in register blocks of 4 rows x 4
//      vectors, so each loaded (converted) value vector serves 4 rows. On the bf16-dot path
//      (bf16 queries and cache, avx512_bf16) p is rounded to bf16 and the value tile is
//      interleaved by key pairs, so one dot_bf16 adds two keys' contributions (half the
//      instructions of fp32 FMAs, no conversion of V to fp32).
// K/V are read from the cache once per tile and reused by all R rows from L1 (GQA packing).
// Key tiles outside the union of the rows' visible intervals are never visited (causal,
// sliding-window and chunked-local skipping).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "attnkit/core/numeric.h"
#include "attnkit/kernels/mask.h"
#include "attnkit/kernels/paged_attention_params.h"
#include "backends/cpu_flash/flash_plan.h"
#include "kernels/cpu/kv_tags.h"
#include "kernels/cpu/prefetch.h"
#include "kernels/cpu/row_io.h"

// Requires `Ops` (the SIMD interface) declared in the including namespace.

// The end of a work item for its head-th KV head (rows rows; o [rows][head_size_v]
// unnormalised, m the exponent base and l the sum of each row): split-KV items keep o, m and
// l in the partial buffer for the merge; the others write each output row normalised, with
// the sink in the denominator. Shared by ItemKernel and flash_amx_impl.h's AmxItemKernel.
inline void finish_item_head(const attnkit::PagedAttentionParams& p,
                             const attnkit::cpu::FlashWorkItem& it, int head, int64_t tok0,
                             int rows, const float* o, const float* m, const float* l,
                             float* partials) {
  const int dv = p.head_size_v;
  if (it.partial_offset >= 0) {  // split-KV: keep o, m, l for the merge
    float* part = partials + it.partial_offset + head * it.partial_head_stride;
    std::memcpy(part, o, sizeof(float) * static_cast<size_t>(rows) * dv);
    std::memcpy(part + int64_t{rows} * dv, m, sizeof(float) * static_cast<size_t>(rows));
    std::memcpy(part + int64_t{rows} * dv + rows, l, sizeof(float) * static_cast<size_t>(rows));
    return;
  }
  const int group = p.num_heads / p.num_kv_heads;
  const int64_t osize = element_size(p.q_dtype);
  for (int r = 0; r < rows; ++r) {
    const int t = r / group;
    const int h = (it.kv_head + head) * group + r % group;
    void* dst = static_cast<char*>(p.out) +
                ((tok0 + t) * p.o_token_stride + int64_t{h} * p.o_head_stride) * osize;
    // NOLINTNEXTLINE(bugprone-narrowing-conversions): float to float (the check misreads -inf)
    const float sink = p.sinks != nullptr ? p.sinks[h] : kNegInf;
    const float m_all = std::max(m[r], sink);
    float factor = 0.0f;
    // A row whose every score was NaN keeps m = -inf (max skips NaN) but a NaN sum.
    if (m_all != kNegInf || std::isnan(l[r])) {
      const float w = m[r] == kNegInf ? 0.0f : std::exp(m[r] - m_all);
      const float denom = l[r] * w + (p.sinks != nullptr ? std::exp(sink - m_all) : 0.0f);
      // NaN in the sums (NaN or inf in this request's inputs) must show in its output,
      // never turn into a finite row.
      factor = denom > 0.0f || std::isnan(denom) ? w * p.v_scale / denom : 0.0f;
    }
    store_row(p.q_dtype, o + int64_t{r} * dv, factor, dst, dv);
  }
}

// Fills kp/vp with the addresses of the K and V rows of keys kt .. kt+n-1 of (seq, kv_head)
// in a cache of Storage elements: paged through the block table, or contiguous from
// kv_start_loc. Shared by ItemKernel and flash_outer_product_impl.h's kernel.
template <class Storage>
void locate_key_rows(const attnkit::PagedAttentionParams& p, int seq, int kv_head, int kt, int n,
                     const Storage** kp, const Storage** vp) {
  const auto* kbase = static_cast<const Storage*>(p.k_cache) + int64_t{kv_head} * p.k_head_stride;
  const auto* vbase = static_cast<const Storage*>(p.v_cache) + int64_t{kv_head} * p.v_head_stride;
  if (p.block_table != nullptr) {
    const int32_t* bt = p.block_table + int64_t{seq} * p.block_table_stride;
    int b = kt / p.block_size;
    int off = kt % p.block_size;
    for (int j = 0; j < n; ++j) {
      const int64_t blk = bt[b];
      kp[j] = kbase + blk * p.k_block_stride + off * p.k_token_stride;
      vp[j] = vbase + blk * p.v_block_stride + off * p.v_token_stride;
      if (++off == p.block_size) {
        off = 0;
        ++b;
      }
    }
  } else {
    const int64_t row0 = int64_t{p.kv_start_loc[seq]} + kt;
    for (int j = 0; j < n; ++j) {
      kp[j] = kbase + (row0 + j) * p.k_token_stride;
      vp[j] = vbase + (row0 + j) * p.v_token_stride;
    }
  }
}

template <class Kv, bool kDot>
class ItemKernel {
  static constexpr int L = Ops::kLanes;
  using V = typename Ops::V;
  using Storage = typename Kv::Storage;
  static constexpr int64_t kStorageBytes = sizeof(Storage);

 public:
  ItemKernel(const attnkit::PagedAttentionParams& p, const attnkit::cpu::FlashPlan& plan,
             float* scratch, float* partials)
      : p_(p), partials_(partials) {
    const attnkit::cpu::ScratchLayout s =
        attnkit::cpu::scratch_layout(plan.max_rows, plan.head_size, plan.head_size_v);
    q_base_ = scratch + s.q;
    o_base_ = scratch + s.o;
    pr_base_ = scratch + s.p;
    m_base_ = scratch + s.m;
    l_base_ = scratch + s.l;
    alpha_base_ = scratch + s.alpha;
    select_head(0, 0);
    kf_ = scratch + s.kf;
    vf_ = scratch + s.vf;
    group_ = p.num_heads / p.num_kv_heads;
    d_ = p.head_size;
    dv_ = p.head_size_v;
    score_scale_ = p.scale * p.k_scale;
    prefetch_tiles_ = attnkit::cpu::decode_prefetch_tiles();
    mask_ = attnkit::mask_rule(p);
    split_heads_ = kSplit && d_ % 16 == 0 && dv_ % 16 == 0;
    intervals_ = reinterpret_cast<attnkit::KeySpan*>(scratch + s.iv);
  }

  void run(const attnkit::cpu::FlashWorkItem& it) {
    const int seq = it.seq;
    const int q_len = p_.query_start_loc[seq + 1] - p_.query_start_loc[seq];
    const int kv_len = p_.seq_lens[seq];
    const int tokens = it.q_end - it.q_begin;
    const int rows = tokens * group_;
    const int64_t tok0 = p_.query_start_loc[seq] + it.q_begin;
    const int heads = it.num_kv_heads;
    split_ = kSplit && split_heads_ && direct_decode(rows);
    for (int h = 0; h < heads; ++h) {
      select_head(h, rows);
      load_queries(it.kv_head + h, tok0, rows);
      for (int r = 0; r < rows; ++r) {
        m_[r] = kNegInf;
        l_[r] = 0.0f;
        std::fill(o_ + int64_t{r} * dv_, o_ + int64_t{r + 1} * dv_, 0.0f);
      }
    }
    for (int t = 0; t < tokens; ++t) {
      const int pos = attnkit::query_position(q_len, kv_len, it.q_begin + t);
      intervals_[t] = attnkit::visible_keys(mask_, pos, kv_len);
    }
    // Keys [k_begin, k_end): the item's range cut to the union of its rows' visible keys
    // (the first row's begin to the last row's end, see visible_keys_of_rows).
    const int k_begin = std::max(it.k_begin, intervals_[0].begin);
    const int k_end = std::min(it.k_end, intervals_[tokens - 1].end);
    const int tile_keys = direct_decode(rows) ? kDirectTileKeys : L;
    for (int kt = k_begin; kt < k_end; kt += tile_keys) {
      const int n = std::min(tile_keys, k_end - kt);
      const int pf_kt = kt + prefetch_tiles_ * tile_keys;
      const int npf = pf_kt < k_end ? std::min(tile_keys, k_end - pf_kt) : 0;
      // The rows of a later tile, prefetched line by line inside the loops below.
      const bool prefetch_in_loops = kDot || direct_decode(rows);
      // The block table is read once per tile, for the item's first KV head; another head's
      // rows are those rows moved by its head stride (the same token slots).
      locate_keys(seq, it.kv_head, kt, n, kp_first_, vp_first_);
      if (prefetch_in_loops && npf > 0) {
        locate_keys(seq, it.kv_head, pf_kt, npf, kpf_first_, vpf_first_);
      }
      // A head-packed item visits the tile of every head in turn, so together they read
      // each block of the cache whole.
      for (int h = 0; h < heads; ++h) {
        const int kv_head = it.kv_head + h;
        select_head(h, rows);
        const int64_t kh = int64_t{h} * p_.k_head_stride, vh = int64_t{h} * p_.v_head_stride;
        if (prefetch_in_loops) {
          npf_ = npf;
          for (int j = 0; j < npf; ++j) {
            kpf_[j] = kpf_first_[j] + kh;
            vpf_[j] = vpf_first_[j] + vh;
          }
        } else {
          npf_ = 0;
          // Paged rows of one head are strided across pages, which the hardware
          // prefetchers do not follow, so without this each tile waits on memory.
          if (npf > 0) prefetch_keys(seq, kv_head, pf_kt, npf);
        }
        for (int j = 0; j < n; ++j) {
          kp_[j] = kp_first_[j] + kh;
          vp_[j] = vp_first_[j] + vh;
        }
        scores_and_softmax(rows, kt, n, k_begin, k_end);
        accumulate_values(rows, n);
      }
    }
    for (int h = 0; h < heads; ++h) {
      select_head(h, rows);
      if (kSplit && split_) {
        for (int r = 0; r < rows; ++r) from_split_order(o_ + int64_t{r} * dv_, dv_);
      }
      finish(it, h, tok0, rows);
    }
  }

 private:
  // Points q_, o_, pr_, m_, l_, alpha_ at the rows of the item's head h (rows per head).
  void select_head(int h, int rows) {
    const int64_t r0 = int64_t{h} * rows;
    if constexpr (kDot) {  // q holds raw bf16 rows
      q_ = reinterpret_cast<float*>(reinterpret_cast<uint16_t*>(q_base_) + r0 * d_);
    } else {
      q_ = q_base_ + r0 * d_;
    }
    o_ = o_base_ + r0 * dv_;
    pr_ = pr_base_ + r0 * attnkit::cpu::kMaxTileKeys;
    m_ = m_base_ + r0;
    l_ = l_base_ + r0;
    alpha_ = alpha_base_ + r0;
  }

  void load_queries(int kv_head, int64_t tok0, int rows) {
    const int64_t qsize = element_size(p_.q_dtype);
    for (int r = 0; r < rows; ++r) {
      const int t = r / group_;
      const int h = kv_head * group_ + r % group_;
      const char* src = static_cast<const char*>(p_.q) +
                        ((tok0 + t) * p_.q_token_stride + int64_t{h} * p_.q_head_stride) * qsize;
      if constexpr (kDot) {
        std::memcpy(reinterpret_cast<uint16_t*>(q_) + int64_t{r} * d_, src,
                    static_cast<size_t>(d_) * 2);
      } else {
        load_row_f32(p_.q_dtype, src, q_ + int64_t{r} * d_, d_);
        if (kSplit && split_) to_split_order(q_ + int64_t{r} * d_, d_);
      }
    }
  }

  // The 8-lane fp32-FMA decode path, which widens K from the cache in registers (qk_direct)
  // and V in registers (update_rows<false>, up to 4 rows) or into the value tile. Like the
  // bf16-dot path it prefetches the later tile's rows line by line inside those loops; one
  // burst of them at the start of each head step ran slower on an Intel Xeon
  // (bench/results/cpu_flash.md).
  static constexpr bool direct_decode(int rows) {
    return !kDot && L == 8 && !std::is_same_v<Kv, attnkit::cpu::KvF32> && rows <= 8;
  }
  // Keys per tile of the direct decode path: two vectors of 8 lanes, so the softmax
  // bookkeeping of each row and the reload, rescale and store of its output accumulator
  // come once per 16 keys.
  static constexpr int kDirectTileKeys = attnkit::cpu::kMaxTileKeys;
  static_assert(kDirectTileKeys == 2 * 8);

  // A bf16 cache on AVX2 widens its rows on the direct decode path in the split column
  // order of Ops::load_bf16_split (even then odd elements of every 16), half the
  // instructions of widening in order. The item's q and o rows are kept in that order from
  // load_queries to finish: the scores q . k do not depend on it, and o is put back in
  // order once per item, before its rows are written.
  static constexpr bool kSplit =
      Ops::kHasBf16Split && !kDot && std::is_same_v<Kv, attnkit::cpu::KvBf16>;

  // Issues prefetches for every cache line of the K and V rows of keys kt .. kt+n-1.
  void prefetch_keys(int seq, int kv_head, int kt, int n) {
    const int64_t esize = sizeof(Storage);
    const auto* kbase =
        static_cast<const char*>(p_.k_cache) + int64_t{kv_head} * p_.k_head_stride * esize;
    const auto* vbase =
        static_cast<const char*>(p_.v_cache) + int64_t{kv_head} * p_.v_head_stride * esize;
    const int64_t k_bytes = int64_t{d_} * esize, v_bytes = int64_t{dv_} * esize;
    for (int j = 0; j < n; ++j) {
      const int k = kt + j;
      const char* kr;
      const char* vr;
      if (p_.block_table != nullptr) {
        const int64_t blk =
            p_.block_table[int64_t{seq} * p_.block_table_stride + k / p_.block_size];
        const int64_t off = k % p_.block_size;
        kr = kbase + (blk * p_.k_block_stride + off * p_.k_token_stride) * esize;
        vr = vbase + (blk * p_.v_block_stride + off * p_.v_token_stride) * esize;
      } else {
        const int64_t row = int64_t{p_.kv_start_loc[seq]} + k;
        kr = kbase + row * p_.k_token_stride * esize;
        vr = vbase + row * p_.v_token_stride * esize;
      }
      for (int64_t b = 0; b < k_bytes; b += 64) attnkit::cpu::prefetch_l2(kr + b);
      for (int64_t b = 0; b < v_bytes; b += 64) attnkit::cpu::prefetch_l2(vr + b);
    }
  }

  // Fills kp/vp with the storage addresses of keys kt .. kt+n-1 of (seq, kv_head).
  void locate_keys(int seq, int kv_head, int kt, int n, const Storage** kp, const Storage** vp) {
    locate_key_rows(p_, seq, kv_head, kt, n, kp, vp);
  }

  // Scores of every row against the n keys of the tile, and the online-softmax update.
  void scores_and_softmax(int rows, int kt, int n, int k_begin, int k_end) {
    if constexpr (kDot) {
      // Lanes past n are masked in softmax_row; their keys read key 0's row meanwhile.
      for (int j = n; j < L; ++j) kp_[j] = kp_[0];
      if (rows >= 8) {
        // Enough rows to pay for transposing the key tile once (no per-row reductions).
        if (npf_ > 0) {
          transpose_keys<true>();
        } else {
          transpose_keys<false>();
        }
        for (int r0 = 0; r0 < rows; r0 += 8) {
          const int nr = std::min(8, rows - r0);
          V s[8];
          qk_transposed(r0, nr, s);
          softmax_rows8(r0, nr, s, kt, n, k_begin, k_end);
        }
        return;
      }
      for (int r0 = 0; r0 < rows; r0 += 4) {
        const int nr = std::min(4, rows - r0);
        V s[4];
        // The first row block also prefetches the later tile's keys, one line per key and
        // step of the head dimension.
        if (r0 == 0 && npf_ > 0) {
          qk_block<true>(r0, nr, s);
        } else {
          qk_block<false>(r0, nr, s);
        }
        for (int rr = 0; rr < nr; ++rr) softmax_row(r0 + rr, s[rr], kt, n, k_begin, k_end);
      }
    } else {
      if constexpr (L == 8 && !std::is_same_v<Kv, attnkit::cpu::KvF32>) {
        if (rows <= 8) {  // decode-sized: widen K in registers, no converted tile
          for (int r0 = 0; r0 < rows; r0 += 4) {
            qk_direct(r0, std::min(4, rows - r0), kt, n, k_begin, k_end);
          }
          return;
        }
      }
      const float* krow[L];
      for (int j = 0; j < n; ++j) {
        if constexpr (std::is_same_v<Kv, attnkit::cpu::KvF32>) {
          krow[j] = kp_[j];
        } else {
          float* dst = kf_ + int64_t{j} * d_;
          for (int c = 0; c < d_; c += L) Ops::store(dst + c, Ops::load_f32(Kv{}, kp_[j] + c));
          krow[j] = dst;
        }
      }
      if constexpr (L == 8) {
        // Prefill-sized on 8 lanes (the scalar target; AVX2 gives these items to
        // flash_outer_product_impl.h's kernel): register-blocked dot products and the softmax
        // of 8 rows at once (see qk_rows8). Lanes past n read key 0's row and are masked.
        for (int j = n; j < L; ++j) krow[j] = krow[0];
        for (int r0 = 0; r0 < rows; r0 += 8) {
          const int nr = std::min(8, rows - r0);
          V s[8];
          qk_rows8(krow, r0, nr, s);
          softmax_rows8(r0, nr, s, kt, n, k_begin, k_end);
        }
        return;
      }
      for (int r = 0; r < rows; ++r) {
        const KeyRange kr = key_range(r, kt, n, k_begin, k_end);
        if (kr.empty()) {  // this row sees no key of the tile: skip the dot products
          softmax_row(r, Ops::zero(), kt, n, k_begin, k_end);
          continue;
        }
        V acc[L];
        for (V& a : acc) a = Ops::zero();
        const float* qrow = q_ + int64_t{r} * d_;
        for (int c = 0; c < d_; c += L) {
          const V qv = Ops::load(qrow + c);
#pragma GCC unroll 16
          for (int j = 0; j < L; ++j) {
            if (j < n) acc[j] = Ops::fmadd(qv, Ops::load(krow[j] + c), acc[j]);
          }
        }
        softmax_row(r, Ops::reduce_lanes(acc), kt, n, k_begin, k_end);
      }
    }
  }

  // Scores of rows r0 .. r0+rows-1 (rows <= 4) against the n keys of the tile, the keys
  // widened from the cache in registers: blocks of 4 rows x 2 keys (8 accumulators, 2 key
  // vectors and a query vector within AVX2's 16 registers), each block folded by one
  // transpose-add tree. Without a converted tile no K row is stored and reloaded, and both
  // keys' first cache lines are requested together.
  void qk_direct(int r0, int rows, int kt, int n, int k_begin, int k_end) {
    if constexpr (kSplit) {
      if (split_) {
        switch (rows) {
          case 1:
            return qk_direct_rows<1, true>(r0, kt, n, k_begin, k_end);
          case 2:
            return qk_direct_rows<2, true>(r0, kt, n, k_begin, k_end);
          case 3:
            return qk_direct_rows<3, true>(r0, kt, n, k_begin, k_end);
          default:
            return qk_direct_rows<4, true>(r0, kt, n, k_begin, k_end);
        }
      }
    }
    switch (rows) {
      case 1:
        return qk_direct_rows<1>(r0, kt, n, k_begin, k_end);
      case 2:
        return qk_direct_rows<2>(r0, kt, n, k_begin, k_end);
      case 3:
        return qk_direct_rows<3>(r0, kt, n, k_begin, k_end);
      default:
        return qk_direct_rows<4>(r0, kt, n, k_begin, k_end);
    }
  }

  // Cache-line starts per K or V row of the direct decode path's loops: the elements of one
  // 64-byte line.
  static constexpr int64_t kLineElems = 64 / kStorageBytes;

  // qk_direct for a row count known at compile time. Its loop over the head dimension is the
  // decode path's hottest: with the row count a constant it holds no per-row tests, and
  // the prefetch of the later tile's keys (first row block only, one line per key and line
  // of the head dimension) is one unconditional instruction per line, aimed at the current
  // row when there is nothing to prefetch (a line the loop is about to read anyway).
  // kSplitOrder: K widened, and q stored, in the split column order (kSplit).
  template <int kRows, bool kSplitOrder = false>
  void qk_direct_rows(int r0, int kt, int n, int k_begin, int k_end) {
    // Zeroed with vector stores: `= {}` compiled to a `rep stos`, slow to start for 128 bytes
    // (4% of the AVX2 decode profile).
    alignas(64) float sc[4][kDirectTileKeys];
    for (auto& row : sc) {
      Ops::store(row, Ops::zero());
      Ops::store(row + L, Ops::zero());
    }
    const float* q = q_ + int64_t{r0} * d_;
    const int64_t d = d_;
    for (int j0 = 0; j0 < n; j0 += 2) {
      const Storage* ka = kp_[j0];
      const Storage* kb = j0 + 1 < n ? kp_[j0 + 1] : kp_[j0];
      const Storage* pa = r0 == 0 && j0 < npf_ ? kpf_[j0] : ka;
      const Storage* pb = r0 == 0 && j0 + 1 < npf_ ? kpf_[j0 + 1] : kb;
      V acc[2 * kRows];
      for (V& a : acc) a = Ops::zero();
      // The later tile's lines first, then the products over the whole head dimension: a
      // line loop around the product loop kept seven pointers live across it, spilled and
      // stepped through the stack on every line (a third of the instructions of the loop
      // on AVX2).
      for (int64_t line = 0; line < d; line += kLineElems) {
        attnkit::cpu::prefetch_l2(pa + line);
        attnkit::cpu::prefetch_l2(pb + line);
      }
      if constexpr (kSplitOrder) {
        for (int64_t c = 0; c < d; c += int64_t{2} * L) {
          V a_even, a_odd, b_even, b_odd;
          Ops::load_bf16_split(ka + c, a_even, a_odd);
          Ops::load_bf16_split(kb + c, b_even, b_odd);
#pragma GCC unroll 4
          for (int64_t rr = 0; rr < kRows; ++rr) {
            const V q_even = Ops::load(q + rr * d + c);
            const V q_odd = Ops::load(q + rr * d + c + L);
            acc[2 * rr] = Ops::fmadd(q_even, a_even, acc[2 * rr]);
            acc[2 * rr + 1] = Ops::fmadd(q_even, b_even, acc[2 * rr + 1]);
            acc[2 * rr] = Ops::fmadd(q_odd, a_odd, acc[2 * rr]);
            acc[2 * rr + 1] = Ops::fmadd(q_odd, b_odd, acc[2 * rr + 1]);
          }
        }
      } else {
        for (int64_t c = 0; c < d; c += L) {
          const V a = Ops::load_f32(Kv{}, ka + c);
          const V b = Ops::load_f32(Kv{}, kb + c);
#pragma GCC unroll 4
          for (int64_t rr = 0; rr < kRows; ++rr) {
            const V qv = Ops::load(q + rr * d + c);
            acc[2 * rr] = Ops::fmadd(qv, a, acc[2 * rr]);
            acc[2 * rr + 1] = Ops::fmadd(qv, b, acc[2 * rr + 1]);
          }
        }
      }
      V all[8];
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) all[i] = i < 2 * kRows ? acc[i] : Ops::zero();
      alignas(32) float folded[L];
      Ops::store(folded, Ops::reduce_lanes(all));  // lane 2r + k: row r, key j0 + k
#pragma GCC unroll 4
      for (int64_t rr = 0; rr < kRows; ++rr) {
        sc[rr][j0] = folded[2 * rr];
        if (j0 + 1 < n) sc[rr][j0 + 1] = folded[2 * rr + 1];
      }
    }
    for (int rr = 0; rr < kRows; ++rr) {
      softmax_row16(r0 + rr, Ops::load(sc[rr]), Ops::load(sc[rr] + L), kt, n, k_begin, k_end);
    }
  }

  // Dot products of rows r0 .. r0+nr-1 (nr <= 8) with the 8 fp32 key rows krow (8 lanes):
  // s[rr] lane j = q_{r0+rr} . k_j. Blocks of 2 rows x 4 keys (8 accumulators, 4 key vectors
  // and 2 query vectors in AVX2's 16 registers): 6 loads per 8 FMAs where a row against its
  // 8 keys takes 9. Each block is folded by one transpose-add tree (lane 4 r + k), and the
  // two key halves of a row pair are joined by one 128-bit permute per row.
  void qk_rows8(const float* const* krow, int r0, int nr, V* s) {
    for (int rp = 0; rp < 8; rp += 2) {
      const float* q0 = q_ + int64_t{r0 + (rp < nr ? rp : 0)} * d_;
      const float* q1 = q_ + int64_t{r0 + (rp + 1 < nr ? rp + 1 : 0)} * d_;
      V half[2];
      for (int g = 0; g < 2; ++g) {
        const float* const* k = krow + int64_t{4} * g;
        V acc[8];
        for (V& a : acc) a = Ops::zero();
        for (int64_t c = 0; c < d_; c += L) {
          const V qa = Ops::load(q0 + c);
          const V qb = Ops::load(q1 + c);
#pragma GCC unroll 4
          for (int kk = 0; kk < 4; ++kk) {
            const V kv = Ops::load(k[kk] + c);
            acc[kk] = Ops::fmadd(qa, kv, acc[kk]);
            acc[4 + kk] = Ops::fmadd(qb, kv, acc[4 + kk]);
          }
        }
        half[g] = Ops::reduce_lanes(acc);
      }
      s[rp] = Ops::row_pair_lo(half[0], half[1]);
      s[rp + 1] = Ops::row_pair_hi(half[0], half[1]);
    }
  }

  struct KeyRange {
    int begin, end;  // lanes [begin, end) of the tile row r sees (begin >= end: none)
    bool empty() const { return begin >= end; }
  };
  KeyRange key_range(int r, int kt, int n, int k_begin, int k_end) const {
    const attnkit::KeySpan& iv = intervals_[r / group_];
    return {std::max(iv.begin, k_begin) - kt, std::min({iv.end, k_end, kt + n}) - kt};
  }

  // Online-softmax update of row r with its raw dot products `dots` (lane j = key kt + j):
  // scale, soft-cap, mask; new running max and sum; p to pr_ (bf16 on the dot path).
  void softmax_row(int r, V dots, int kt, int n, int k_begin, int k_end) {
    const KeyRange kr = key_range(r, kt, n, k_begin, k_end);
    float* prow = pr_ + int64_t{r} * attnkit::cpu::kMaxTileKeys;
    if (kr.empty()) {  // this row sees no key of the tile
      Ops::store(prow, Ops::zero());
      alpha_[r] = 1.0f;
      return;
    }
    V s = Ops::mul(dots, Ops::set1(score_scale_));
    if (p_.soft_cap > 0.0f) {
      const V cap = Ops::set1(p_.soft_cap);
      s = Ops::mul(cap, Ops::tanh(Ops::mul(s, Ops::set1(1.0f / p_.soft_cap))));
    }
    if (kr.begin > 0 || kr.end < L) s = Ops::mask_range(s, kr.begin, kr.end);
    const float m_old = m_[r];
    const float m_new = std::max(m_old, Ops::hmax(s));
    V pv = Ops::exp(Ops::sub(s, Ops::set1(m_new)));
    const float alpha = m_new == m_old ? 1.0f : std::exp(m_old - m_new);
    if constexpr (kDot) {
      // The values are weighted by the bf16-rounded p; the sum uses the same numbers.
      Ops::store_bf16(reinterpret_cast<uint16_t*>(prow), pv);
      pv = Ops::round_to_bf16(pv);
    } else {
      Ops::store(prow, pv);
    }
    l_[r] = l_[r] * alpha + Ops::hsum(pv);
    m_[r] = m_new;
    alpha_[r] = alpha;
  }

  // softmax_row for the 16-key tiles of the direct decode path (L = 8): lo holds the dot
  // products of keys kt .. kt+7, hi those of kt+8 .. kt+15.
  void softmax_row16(int r, V lo, V hi, int kt, int n, int k_begin, int k_end) {
    const KeyRange kr = key_range(r, kt, n, k_begin, k_end);
    float* prow = pr_ + int64_t{r} * attnkit::cpu::kMaxTileKeys;
    if (kr.empty()) {  // this row sees no key of the tile
      Ops::store(prow, Ops::zero());
      Ops::store(prow + L, Ops::zero());
      alpha_[r] = 1.0f;
      return;
    }
    const V scale = Ops::set1(score_scale_);
    V s[2] = {Ops::mul(lo, scale), Ops::mul(hi, scale)};
    for (int i = 0; i < 2; ++i) {
      if (p_.soft_cap > 0.0f) {
        const V cap = Ops::set1(p_.soft_cap);
        s[i] = Ops::mul(cap, Ops::tanh(Ops::mul(s[i], Ops::set1(1.0f / p_.soft_cap))));
      }
      if (kr.begin > 0 || kr.end < 2 * L) {
        s[i] = Ops::mask_range(s[i], kr.begin - i * L, kr.end - i * L);
      }
    }
    const float m_old = m_[r];
    const float m_new = std::max(m_old, Ops::hmax(Ops::max(s[0], s[1])));
    const V base = Ops::set1(m_new);
    const V p0 = Ops::exp(Ops::sub(s[0], base));
    const V p1 = Ops::exp(Ops::sub(s[1], base));
    const float alpha = m_new == m_old ? 1.0f : std::exp(m_old - m_new);
    Ops::store(prow, p0);
    Ops::store(prow + L, p1);
    l_[r] = l_[r] * alpha + Ops::hsum(Ops::add(p0, p1));
    m_[r] = m_new;
    alpha_[r] = alpha;
  }

  // The key tile transposed for qk_transposed, at kf_: [head_size / 2 pairs][16 keys] of
  // 32-bit bf16 pairs, so vector c holds pair c of every key. kPrefetch: also prefetch, line
  // by line, the keys of the tile prefetch_tiles_ ahead.
  template <bool kPrefetch>
  void transpose_keys() {
    using BV = typename Ops::BV;
    auto* kt = reinterpret_cast<uint16_t*>(kf_);
    for (int64_t c = 0; c < d_; c += 32) {
      const bool full = c + 32 <= d_;  // else 16 elements (8 pairs) are left
      BV key_rows[16];
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) {
        key_rows[j] = full ? Ops::load_bf16_pairs(kp_[j] + c) : Ops::load_bf16_half(kp_[j] + c);
        if constexpr (kPrefetch) {
          if (j < npf_) attnkit::cpu::prefetch_l2(kpf_[j] + c);
        }
      }
      Ops::transpose16_store(key_rows, kt + c * 16, full ? 16 : 8);
    }
  }

  // softmax_row for rows r0 .. r0+nr-1 (nr <= 8) at once: the row maxima and sums come from
  // one transposed reduction each (lane rr = row r0 + rr) and the rescale factors from one
  // vector exp, instead of two horizontal reductions and a scalar exp per row.
  void softmax_rows8(int r0, int nr, V* s, int kt, int n, int k_begin, int k_end) {
    const V vscale = Ops::set1(score_scale_);
    const V neg_inf = Ops::set1(kNegInf);
    V red[16];
    for (int rr = 0; rr < 8; ++rr) {
      const KeyRange kr = key_range(r0 + rr, kt, n, k_begin, k_end);
      if (rr >= nr || kr.empty()) {  // no row, or a row that sees no key of the tile
        s[rr] = neg_inf;
      } else {
        V x = Ops::mul(s[rr], vscale);
        if (p_.soft_cap > 0.0f) {
          const V cap = Ops::set1(p_.soft_cap);
          x = Ops::mul(cap, Ops::tanh(Ops::mul(x, Ops::set1(1.0f / p_.soft_cap))));
        }
        if (kr.begin > 0 || kr.end < L) x = Ops::mask_range(x, kr.begin, kr.end);
        s[rr] = x;
      }
      red[rr] = s[rr];
      red[8 + rr] = neg_inf;
    }
    const V m_old = Ops::load_n(m_ + r0, nr, kNegInf);
    const V m_new = Ops::max(m_old, Ops::reduce_lanes_max(red));
    // A row with no visible key so far keeps m = -inf; exp(-inf - 0) = 0 gives it p = 0.
    const V base = Ops::select_eq(m_new, neg_inf, Ops::zero(), m_new);
    const V alpha = Ops::select_eq(m_new, m_old, Ops::set1(1.0f), Ops::exp(Ops::sub(m_old, base)));
    for (int rr = 0; rr < 8; ++rr) {
      if (rr < nr) {
        const V pv = Ops::exp(Ops::sub(s[rr], Ops::lane(base, rr)));
        float* prow = pr_ + int64_t{r0 + rr} * attnkit::cpu::kMaxTileKeys;
        if constexpr (kDot) {
          // The values are weighted by the bf16-rounded p; the sum uses the same numbers.
          Ops::store_bf16(reinterpret_cast<uint16_t*>(prow), pv);
          red[rr] = Ops::round_to_bf16(pv);
        } else {
          Ops::store(prow, pv);
          red[rr] = pv;
        }
      } else {
        red[rr] = Ops::zero();
      }
      red[8 + rr] = Ops::zero();
    }
    const V l_new = Ops::fmadd(Ops::load_n(l_ + r0, nr, 0.0f), alpha, Ops::reduce_lanes(red));
    Ops::store_n(m_ + r0, m_new, nr);
    Ops::store_n(l_ + r0, l_new, nr);
    Ops::store_n(alpha_ + r0, alpha, nr);
  }

  // Dot products of rows r0 .. r0+nr-1 (nr <= 8) with the tile's 16 keys from the
  // transposed tile: s[rr] += (q pair c broadcast) . (pair c of the 16 keys), lane j = key j.
  // Eight rows give eight independent accumulation chains (covers the dot latency).
  void qk_transposed(int r0, int nr, V* s) {
    const auto* kt = reinterpret_cast<const uint16_t*>(kf_);
    const uint16_t* qr[8];
    for (int rr = 0; rr < 8; ++rr) {
      qr[rr] = reinterpret_cast<const uint16_t*>(q_) + int64_t{r0 + (rr < nr ? rr : 0)} * d_;
    }
#pragma GCC unroll 8
    for (int rr = 0; rr < 8; ++rr) s[rr] = Ops::zero();
    for (int64_t c = 0; c < d_; c += 2) {
      const auto kv = Ops::load_bf16_pairs(kt + c * 16);
#pragma GCC unroll 8
      for (int rr = 0; rr < 8; ++rr)
        s[rr] = Ops::dot_bf16(s[rr], Ops::broadcast_pair(qr[rr] + c), kv);
    }
  }

  // Dot products (bf16 pairs) of rows r0 .. r0+nr-1 (nr <= 4) with the tile's 16 keys:
  // s[rr] lane j = q_{r0+rr} . k_j. Computed in groups of 4 keys x 4 rows (16 accumulators),
  // so each loaded key vector serves 4 rows and each query vector 4 keys; each group is
  // folded by reduce_lanes (lane 4 rr + kk = row rr, key kk) and a 4x4 transpose of 128-bit
  // blocks puts every row's 16 keys in one vector. kPrefetch: also prefetch, line by line,
  // the keys of the tile prefetch_tiles_ ahead.
  template <bool kPrefetch>
  void qk_block(int r0, int nr, V* s) {
    using BV = typename Ops::BV;
    const uint16_t* qr[4];
    for (int rr = 0; rr < 4; ++rr) {
      qr[rr] = reinterpret_cast<const uint16_t*>(q_) + int64_t{r0 + (rr < nr ? rr : 0)} * d_;
    }
    V part[4];
    for (int g = 0; g < 4; ++g) {
      V acc[16];
#pragma GCC unroll 16
      for (V& a : acc) a = Ops::zero();
      const Storage* const* k = kp_ + 4 * g;
      int c = 0;
      for (; c + 32 <= d_; c += 32) {
        BV kv[4];
#pragma GCC unroll 4
        for (int kk = 0; kk < 4; ++kk) {
          kv[kk] = Ops::load_bf16_pairs(k[kk] + c);
          if constexpr (kPrefetch) {
            if (4 * g + kk < npf_) attnkit::cpu::prefetch_l2(kpf_[4 * g + kk] + c);
          }
        }
#pragma GCC unroll 4
        for (int rr = 0; rr < 4; ++rr) {
          const BV qv = Ops::load_bf16_pairs(qr[rr] + c);
#pragma GCC unroll 4
          for (int kk = 0; kk < 4; ++kk)
            acc[rr * 4 + kk] = Ops::dot_bf16(acc[rr * 4 + kk], qv, kv[kk]);
        }
      }
      if (c < d_) {  // a last 16 elements
        BV kv[4];
#pragma GCC unroll 4
        for (int kk = 0; kk < 4; ++kk) kv[kk] = Ops::load_bf16_half(k[kk] + c);
#pragma GCC unroll 4
        for (int rr = 0; rr < 4; ++rr) {
          const BV qv = Ops::load_bf16_half(qr[rr] + c);
#pragma GCC unroll 4
          for (int kk = 0; kk < 4; ++kk)
            acc[rr * 4 + kk] = Ops::dot_bf16(acc[rr * 4 + kk], qv, kv[kk]);
        }
      }
      part[g] = Ops::reduce_lanes(acc);
    }
    Ops::transpose_blocks4(part, s);
  }

  // o[r] = alpha[r] o[r] + sum_j p[r][j] v_j for rows r0 .. r0+nr-1 (nr <= 4) and value
  // vectors c0 .. c0+NC-1. kFromTile: values come from the fp32 tile vf_ (or directly from
  // an fp32 cache), else they are converted from the cache in registers, in the split
  // column order if kSplitOrder (NC even, c0 even).
  template <int NC, bool kFromTile, int kRows, bool kSplitOrder = false>
  void update_block(int r0, int c0, int n) {
    static_assert(!kSplitOrder || (!kFromTile && NC % 2 == 0));
    V acc[kRows][NC];
#pragma GCC unroll 4
    for (int rr = 0; rr < kRows; ++rr) {
      const V a = Ops::set1(alpha_[r0 + rr]);
      const float* orow = o_ + int64_t{r0 + rr} * dv_ + int64_t{c0} * L;
#pragma GCC unroll 4
      for (int64_t cc = 0; cc < NC; ++cc) acc[rr][cc] = Ops::mul(Ops::load(orow + cc * L), a);
    }
    // Without a value tile, the first row block also prefetches (into L2) the lines that
    // start in its columns of value row j of the tile prefetch_tiles_ ahead; rows past npf_
    // aim at row j itself, which the loop reads anyway, so the loop holds no test.
    const int64_t col_bytes = int64_t{c0} * L * kStorageBytes;
    const int64_t pf_end = !kFromTile && r0 == 0 ? col_bytes + int64_t{NC} * L * kStorageBytes : 0;
    const int64_t pf_begin = (col_bytes + 63) / 64 * 64;
    const float* pr = pr_ + int64_t{r0} * attnkit::cpu::kMaxTileKeys;
    // The products of key j: its value vectors (converted in registers, or from the tile)
    // times each row's weight.
    auto key_step = [&](int j) __attribute__((always_inline)) {
      V vv[NC];
      if constexpr (kSplitOrder) {
#pragma GCC unroll 4
        for (int64_t cc = 0; cc < NC; cc += 2) {
          Ops::load_bf16_split(vp_[j] + (c0 + cc) * L, vv[cc], vv[cc + 1]);
        }
      } else {
#pragma GCC unroll 4
        for (int64_t cc = 0; cc < NC; ++cc) {
          if constexpr (kFromTile) {
            vv[cc] = Ops::load(vrow_[j] + (c0 + cc) * L);
          } else {
            vv[cc] = Ops::load_f32(Kv{}, vp_[j] + (c0 + cc) * L);
          }
        }
      }
#pragma GCC unroll 4
      for (int64_t rr = 0; rr < kRows; ++rr) {
        const V pb = Ops::set1(pr[rr * attnkit::cpu::kMaxTileKeys + j]);
#pragma GCC unroll 4
        for (int cc = 0; cc < NC; ++cc) acc[rr][cc] = Ops::fmadd(pb, vv[cc], acc[rr][cc]);
      }
    };
    bool whole_tile = false;
    if constexpr (Ops::kUnrollKeyTiles) {
      whole_tile = n == kDirectTileKeys;
      if (whole_tile) {
        // A whole tile: the key loop unrolled, with at most one line start per block to
        // prefetch (the block spans NC * L elements, at most 64 bytes). Its loop control and
        // the test of the prefetch loop were half the instructions of a 16-key block on AVX2.
        static_assert(kFromTile || int64_t{NC} * L * kStorageBytes <= 64);
        if (!kFromTile && pf_end > pf_begin && npf_ == kDirectTileKeys) {
#pragma GCC unroll 16
          for (int j = 0; j < kDirectTileKeys; ++j) {
            attnkit::cpu::prefetch_l2(reinterpret_cast<const char*>(vpf_[j]) + pf_begin);
            key_step(j);
          }
        } else if (!kFromTile && pf_end > pf_begin) {
          for (int j = 0; j < npf_; ++j) {
            attnkit::cpu::prefetch_l2(reinterpret_cast<const char*>(vpf_[j]) + pf_begin);
          }
#pragma GCC unroll 16
          for (int j = 0; j < kDirectTileKeys; ++j) key_step(j);
        } else {
#pragma GCC unroll 16
          for (int j = 0; j < kDirectTileKeys; ++j) key_step(j);
        }
      }
    }
    if (!whole_tile) {
      for (int j = 0; j < n; ++j) {
        if constexpr (!kFromTile) {
          const char* row = reinterpret_cast<const char*>(j < npf_ ? vpf_[j] : vp_[j]);
          for (int64_t b = pf_begin; b < pf_end; b += 64) attnkit::cpu::prefetch_l2(row + b);
        }
        key_step(j);
      }
    }
#pragma GCC unroll 4
    for (int rr = 0; rr < kRows; ++rr) {
      float* orow = o_ + int64_t{r0 + rr} * dv_ + int64_t{c0} * L;
#pragma GCC unroll 4
      for (int64_t cc = 0; cc < NC; ++cc) Ops::store(orow + cc * L, acc[rr][cc]);
    }
  }

  // Rows r0 .. r0+kRows-1 (kRows <= 4) of update_rows: blocks of kRows rows x
  // Ops::kValueBlock vectors (AVX2: 4 x 2, so 8 accumulators, the value vectors and a
  // broadcast fit its 16 registers), then the remainder. The row count is a constant so the
  // key loop holds no per-row tests.
  // kSplitOrder: see update_block; its value blocks of 2 vectors cover dv_ (a multiple of 16).
  template <bool kFromTile, int kRows, bool kSplitOrder = false>
  void update_row_block(int r0, int n) {
    const int vecs = dv_ / L;
    int c0 = 0;
    constexpr int kBlock = Ops::kValueBlock;
    if constexpr (kSplitOrder) {
      static_assert(!kSplitOrder || kBlock == 2);  // dependent: checked where instantiated
      for (; c0 < vecs; c0 += kBlock) update_block<kBlock, false, kRows, true>(r0, c0, n);
      return;
    }
    for (; c0 + kBlock <= vecs; c0 += kBlock) update_block<kBlock, kFromTile, kRows>(r0, c0, n);
    switch (vecs - c0) {
      case 3:
        update_block<3, kFromTile, kRows>(r0, c0, n);
        break;
      case 2:
        update_block<2, kFromTile, kRows>(r0, c0, n);
        break;
      case 1:
        update_block<1, kFromTile, kRows>(r0, c0, n);
        break;
      default:
        break;
    }
  }

  template <bool kFromTile, bool kSplitOrder = false>
  void update_rows(int rows, int n) {
    for (int r0 = 0; r0 < rows; r0 += 4) {
      switch (std::min(4, rows - r0)) {
        case 1:
          update_row_block<kFromTile, 1, kSplitOrder>(r0, n);
          break;
        case 2:
          update_row_block<kFromTile, 2, kSplitOrder>(r0, n);
          break;
        case 3:
          update_row_block<kFromTile, 3, kSplitOrder>(r0, n);
          break;
        default:
          update_row_block<kFromTile, 4, kSplitOrder>(r0, n);
          break;
      }
    }
  }

  // The value tile interleaved by key pairs for dot_bf16, at vt_: pair q (keys 2q, 2q+1)
  // and vector v (columns 16v .. 16v+15) hold (v_2q[c], v_2q+1[c]) for c = 16v + lane, 32
  // bf16 per vector; an odd last key is paired with zeros.
  void interleave_values(int n) {
    using BV = typename Ops::BV;
    auto* vt = reinterpret_cast<uint16_t*>(vf_);
    const int vecs = dv_ / 16;
    for (int q = 0; 2 * q < n; ++q) {
      const Storage* a = vp_[2 * q];
      const Storage* b = 2 * q + 1 < n ? vp_[2 * q + 1] : nullptr;
      uint16_t* dst = vt + int64_t{q} * vecs * 32;
      int64_t c = 0;
      for (; c + 32 <= dv_; c += 32) {
        BV lo, hi;
        Ops::interleave_bf16(Ops::load_bf16_pairs(a + c),
                             b != nullptr ? Ops::load_bf16_pairs(b + c) : BV{}, lo, hi);
        std::memcpy(dst + c * 2, &lo, sizeof(BV));
        std::memcpy(dst + c * 2 + 32, &hi, sizeof(BV));
      }
      if (c < dv_) {
        BV lo, hi;
        Ops::interleave_bf16(Ops::load_bf16_half(a + c),
                             b != nullptr ? Ops::load_bf16_half(b + c) : BV{}, lo, hi);
        std::memcpy(dst + c * 2, &lo, sizeof(BV));
      }
    }
  }

  // o[r] = alpha[r] o[r] + sum_q (p[r][2q], p[r][2q+1]) . (v_2q, v_2q+1) for rows r0 ..
  // r0+nr-1 (nr <= 4) and value vectors c0 .. c0+NC-1, from the interleaved tile.
  template <int NC>
  void update_block_bf16(int r0, int nr, int c0, int pairs) {
    const auto* vt = reinterpret_cast<const uint16_t*>(vf_);
    const int vecs = dv_ / L;
    V acc[4][NC];
#pragma GCC unroll 4
    for (int rr = 0; rr < 4; ++rr) {
      if (rr < nr) {
        const V a = Ops::set1(alpha_[r0 + rr]);
        const float* orow = o_ + int64_t{r0 + rr} * dv_ + int64_t{c0} * L;
#pragma GCC unroll 4
        for (int64_t cc = 0; cc < NC; ++cc) acc[rr][cc] = Ops::mul(Ops::load(orow + cc * L), a);
      } else {
#pragma GCC unroll 4
        for (int cc = 0; cc < NC; ++cc) acc[rr][cc] = Ops::zero();
      }
    }
    for (int64_t q = 0; q < pairs; ++q) {
      // The first row block also prefetches (into L2) the value bytes of its columns for
      // keys 2q and 2q+1 of the tile prefetch_tiles_ ahead: spread over the products, as the
      // keys' prefetches are over the score loops. Issued in interleave_values, a short
      // loop, they came in one burst per head step and decode ran slower (Intel Xeon,
      // bench/results/cpu_flash.md).
      if (r0 == 0) {
        for (int64_t j = 2 * q; j < std::min<int64_t>(2 * q + 2, npf_); ++j) {
          const char* row = reinterpret_cast<const char*>(vpf_[j] + int64_t{c0} * L);
          for (int64_t byte = 0; byte < int64_t{NC} * L * 2; byte += 64)
            attnkit::cpu::prefetch_l2(row + byte);
        }
      }
      typename Ops::BV vv[NC];
#pragma GCC unroll 4
      for (int cc = 0; cc < NC; ++cc) {
        vv[cc] = Ops::load_bf16_pairs(vt + (q * vecs + c0 + cc) * 32);
      }
#pragma GCC unroll 4
      for (int rr = 0; rr < 4; ++rr) {
        if (rr < nr) {
          const auto pb =
              Ops::broadcast_pair(reinterpret_cast<const uint16_t*>(
                                      pr_ + int64_t{r0 + rr} * attnkit::cpu::kMaxTileKeys) +
                                  2 * q);
#pragma GCC unroll 4
          for (int cc = 0; cc < NC; ++cc) acc[rr][cc] = Ops::dot_bf16(acc[rr][cc], pb, vv[cc]);
        }
      }
    }
#pragma GCC unroll 4
    for (int rr = 0; rr < 4; ++rr) {
      if (rr < nr) {
        float* orow = o_ + int64_t{r0 + rr} * dv_ + int64_t{c0} * L;
#pragma GCC unroll 4
        for (int64_t cc = 0; cc < NC; ++cc) Ops::store(orow + cc * L, acc[rr][cc]);
      }
    }
  }

  void update_rows_bf16(int rows, int n) {
    const int vecs = dv_ / L, pairs = (n + 1) / 2;
    for (int r0 = 0; r0 < rows; r0 += 4) {
      const int nr = std::min(4, rows - r0);
      int c0 = 0;
      for (; c0 + 4 <= vecs; c0 += 4) update_block_bf16<4>(r0, nr, c0, pairs);
      switch (vecs - c0) {
        case 3:
          update_block_bf16<3>(r0, nr, c0, pairs);
          break;
        case 2:
          update_block_bf16<2>(r0, nr, c0, pairs);
          break;
        case 1:
          update_block_bf16<1>(r0, nr, c0, pairs);
          break;
        default:
          break;
      }
    }
  }

  void accumulate_values(int rows, int n) {
    if constexpr (kDot) {
      interleave_values(n);
      update_rows_bf16(rows, n);
    } else if constexpr (std::is_same_v<Kv, attnkit::cpu::KvF32>) {
      for (int j = 0; j < n; ++j) vrow_[j] = vp_[j];
      update_rows<true>(rows, n);
    } else {
      if (rows <= 4) {  // one row block: convert each value vector once, in registers
        if constexpr (kSplit) {
          if (split_) {
            update_rows<false, true>(rows, n);
            return;
          }
        }
        update_rows<false>(rows, n);
        return;
      }
      for (int j = 0; j < n; ++j) {
        float* dst = vf_ + int64_t{j} * dv_;
        widen_value_row(vp_[j], dst);
        vrow_[j] = dst;
        if (j < npf_) {  // value row j of the tile prefetch_tiles_ ahead (direct_decode)
          const char* row = reinterpret_cast<const char*>(vpf_[j]);
          for (int64_t b = 0; b < int64_t{dv_} * kStorageBytes; b += 64)
            attnkit::cpu::prefetch_l2(row + b);
        }
      }
      update_rows<true>(rows, n);
    }
  }

  // Value row v widened to fp32 at dst, in the split column order when the item's o is.
  void widen_value_row(const Storage* v, float* dst) {
    if constexpr (kSplit) {
      if (split_) {
        for (int c = 0; c < dv_; c += int64_t{2} * L) {
          V even, odd;
          Ops::load_bf16_split(v + c, even, odd);
          Ops::store(dst + c, even);
          Ops::store(dst + c + L, odd);
        }
        return;
      }
    }
    for (int c = 0; c < dv_; c += L) Ops::store(dst + c, Ops::load_f32(Kv{}, v + c));
  }

  // Writes the output rows of the item's head `head` (selected), or its partial result.
  void finish(const attnkit::cpu::FlashWorkItem& it, int head, int64_t tok0, int rows) {
    finish_item_head(p_, it, head, tok0, rows, o_, m_, l_, partials_);
  }

  const attnkit::PagedAttentionParams& p_;
  float* partials_;
  float *q_base_, *o_base_, *pr_base_, *m_base_, *l_base_, *alpha_base_;
  // The selected head's rows (select_head).
  float *q_, *o_, *pr_, *m_, *l_, *alpha_;
  float *kf_, *vf_;
  int group_ = 1, d_ = 0, dv_ = 0;
  float score_scale_ = 1.0f;
  attnkit::MaskRule mask_;
  attnkit::KeySpan* intervals_;  // [tokens] visible keys of each query token of the item
  const Storage* kp_[attnkit::cpu::kMaxTileKeys];
  const Storage* vp_[attnkit::cpu::kMaxTileKeys];
  // The current and the prefetched tile's rows of the item's first KV head (kp_, vp_, kpf_
  // and vpf_ are these moved by the selected head's stride).
  const Storage* kp_first_[attnkit::cpu::kMaxTileKeys];
  const Storage* vp_first_[attnkit::cpu::kMaxTileKeys];
  const Storage* kpf_first_[attnkit::cpu::kMaxTileKeys];
  const Storage* vpf_first_[attnkit::cpu::kMaxTileKeys];
  // Rows of the tile prefetch_tiles_ ahead that the loops prefetch line by line (bf16-dot
  // and direct_decode paths), npf_ of them; npf_ = 0 on the other paths.
  const Storage* kpf_[attnkit::cpu::kMaxTileKeys];
  const Storage* vpf_[attnkit::cpu::kMaxTileKeys];
  int npf_ = 0;
  // Key tiles ahead whose rows the decode loops prefetch (into L2) while they work on the
  // current tile: decode_prefetch_tiles() (kernels/cpu/prefetch.h), per CPU vendor. Paged
  // rows of one head are scattered (blocks in any order, rows of other heads in between),
  // which the hardware prefetchers do not follow; spreading one prefetch per cache line
  // over the tile's loads (instead of one burst per tile) keeps the core's miss queue busy
  // without overflowing it.
  int prefetch_tiles_ = 4;
  bool split_heads_ = false;  // kSplit, and both head sizes multiples of 16
  bool split_ = false;        // the current item's q and o rows are in the split column order
  const float* vrow_[attnkit::cpu::kMaxTileKeys];
};

// The split-KV merge pass.
#include "backends/cpu_flash/split_merge_impl.h"
