#pragma once
// CPU_FLASH on AMX tiles: bf16 queries and a bf16 KV cache, head sizes multiples of 32, on a
// CPU with AMX-BF16 (flash_kernels_amx.cpp compiles this for AVX-512 + AMX; flash_attention.cpp
// picks it). The same work items as flash_kernel_impl.h (flash_plan.h): per KV head, rows =
// the query tile's tokens x the KV head's query heads (GQA packing), in groups of 16 (a
// tile's rows); decode-sized items take several KV heads, visited in turn at every step so
// that together they read each page whole. Per step of 64 keys (kernels/cpu/amx_tiles.h):
// K and V's 16-key tiles read where they lie in the page, S^T = K . Q^T, the online softmax
// with a row in each lane (scale, soft-cap, each row's visible keys), O += P . V with V's rows
// as tiles. The end of the item is flash_kernel_impl.h's: the output row normalised with the
// sink, or the unnormalised row, m and l for the split-KV merge.
//
// Requires `Ops` (simd_avx512.h), kernels/cpu/row_io.h's helpers, kernels/cpu/amx_tiles.h,
// flash_kernel_impl.h (finish_item_head, ItemKernel) and flash_driver_impl.h (run_plan_with,
// merge_splits) in the including namespace, and
// flash_amx_layout.h and flash_plan.h before it (outside).

class AmxItemKernel {
 public:
  AmxItemKernel(const attnkit::PagedAttentionParams& p, const attnkit::cpu::FlashPlan& /*plan*/,
                float* scratch, float* partials)
      : p_(p), partials_(partials) {
    // The thread scratch is 64-byte aligned (kernels/cpu/thread_scratch.h); the layout keeps it so.
    base_ = scratch;
    group_ = p.num_heads / p.num_kv_heads;
    d_ = p.head_size;
    dv_ = p.head_size_v;
    mask_ = attnkit::mask_rule(p);
  }

  void run(const attnkit::cpu::FlashWorkItem& it) {
    const int tokens = it.q_end - it.q_begin;
    rows_ = tokens * group_;
    head_rows_ = (rows_ + 15) / 16 * 16;
    heads_ = it.num_kv_heads;
    lay_ = attnkit::cpu::flash_amx_layout(int64_t{heads_} * head_rows_, head_rows_, d_, dv_);
    const int seq = it.seq;
    const int q_len = p_.query_start_loc[seq + 1] - p_.query_start_loc[seq];
    const int kv_len = p_.seq_lens[seq];
    tok0_ = p_.query_start_loc[seq] + it.q_begin;

    // Each row's visible keys, cut to the item's range (padding rows see none); the item's
    // keys: the first token's first to the last token's end (visible_keys grow with the
    // position), cut to its range.
    auto* vb = reinterpret_cast<int32_t*>(base_ + lay_.vis);
    int32_t* ve = vb + head_rows_;
    const auto span_of = [&](int t) {
      return attnkit::visible_keys(mask_, attnkit::query_position(q_len, kv_len, it.q_begin + t),
                                   kv_len);
    };
    for (int r = 0; r < head_rows_; ++r) {
      vb[r] = ve[r] = 0;
      if (r >= rows_) continue;
      const attnkit::KeySpan span = span_of(r / group_);
      vb[r] = std::max(span.begin, it.k_begin);
      ve[r] = std::min(span.end, it.k_end);
    }
    const int k_begin = std::max(it.k_begin, span_of(0).begin);
    const int k_end = std::min(it.k_end, span_of(tokens - 1).end);

    for (int h = 0; h < heads_; ++h) start_head(it.kv_head + h, h);
    amx_configure();
    // Two or more row groups per head: the key-pair form (pair_step).
    const bool pairs = head_rows_ / 16 >= 2;
    if (pairs) {
      for (int k0 = k_begin - k_begin % 16; k0 < k_end; k0 += kAmxPairStepKeys) {
        const int keys = std::min(kAmxPairStepKeys, k_end - k0);
        for (int h = 0; h < heads_; ++h) {
          pair_step(seq, it.kv_head + h, h, k0, keys, k_begin, k_end);
        }
      }
    } else {
      for (int k0 = k_begin - k_begin % 16; k0 < k_end; k0 += kAmxStepKeys) {
        const int keys = std::min(kAmxStepKeys, k_end - k0);
        for (int h = 0; h < heads_; ++h) step(seq, it.kv_head + h, h, k0, keys, k_begin, k_end);
      }
    }
    _tile_release();
    for (int h = 0; h < heads_; ++h) {
      if (pairs) {
        amx_restore_columns<AmxPLayout::kKeyPairs>(o_of(h), rows_, dv_);
      } else {
        amx_restore_columns(o_of(h), rows_, dv_);
      }
      finish_item_head(p_, it, h, tok0_, rows_, o_of(h), m_of(h), l_of(h), partials_);
    }
  }

 private:
  float* o_of(int h) const { return base_ + lay_.o + int64_t{h} * head_rows_ * dv_; }
  float* m_of(int h) const { return base_ + lay_.m + int64_t{h} * head_rows_; }
  float* l_of(int h) const { return base_ + lay_.l + int64_t{h} * head_rows_; }
  uint16_t* qt_of(int h) const {
    return reinterpret_cast<uint16_t*>(base_ + lay_.qt) + int64_t{h} * head_rows_ * d_;
  }

  // Zeroes head h's accumulators and lays out its Q^T, 16 rows at a time.
  void start_head(int kv_head, int h) {
    std::fill(o_of(h), o_of(h) + int64_t{head_rows_} * dv_, 0.0f);
    std::fill(m_of(h), m_of(h) + head_rows_, kNegInf);
    std::fill(l_of(h), l_of(h) + head_rows_, 0.0f);
    const auto* q = static_cast<const uint16_t*>(p_.q);
    for (int g = 0; g < head_rows_ / 16; ++g) {
      const uint16_t* rows[16];
      for (int i = 0; i < 16; ++i) {
        const int r = 16 * g + i;
        const int64_t t = r / group_, head = int64_t{kv_head} * group_ + r % group_;
        rows[i] =
            r < rows_ ? q + (tok0_ + t) * p_.q_token_stride + head * p_.q_head_stride : nullptr;
      }
      amx_transpose_rows(rows, d_, qt_of(h) + int64_t{g} * 16 * d_);
    }
  }

  // The 16-key tiles of KV head kv_head's K and V rows of the step at k0 (amx_step_tiles: read
  // where they lie, or staged with zero rows outside [k_begin, k_end)).
  void locate_tiles(int seq, int kv_head, int k0, int tiles, int k_begin, int k_end,
                    const uint16_t** kp, int64_t* k_stride, const uint16_t** vp,
                    int64_t* v_stride) const {
    const auto* k_head = static_cast<const uint16_t*>(p_.k_cache) + kv_head * p_.k_head_stride;
    const auto* v_head = static_cast<const uint16_t*>(p_.v_cache) + kv_head * p_.v_head_stride;
    const int page = p_.block_table != nullptr ? p_.block_size : 0;
    const auto row_in = [&](const uint16_t* head, int64_t block_stride, int64_t token_stride) {
      return [this, head, block_stride, token_stride, seq](int key) {
        if (p_.block_table == nullptr) {
          return head + (int64_t{p_.kv_start_loc[seq]} + key) * token_stride;
        }
        const int64_t blk =
            p_.block_table[int64_t{seq} * p_.block_table_stride + key / p_.block_size];
        return head + blk * block_stride + int64_t{key % p_.block_size} * token_stride;
      };
    };
    amx_step_tiles(row_in(k_head, p_.k_block_stride, p_.k_token_stride), k0, tiles, k_begin, k_end,
                   page, p_.k_token_stride * 2, d_, reinterpret_cast<uint16_t*>(base_ + lay_.ks),
                   kp, k_stride);
    amx_step_tiles(row_in(v_head, p_.v_block_stride, p_.v_token_stride), k0, tiles, k_begin, k_end,
                   page, p_.v_token_stride * 2, dv_, reinterpret_cast<uint16_t*>(base_ + lay_.vs),
                   vp, v_stride);
  }

  // One step of 64 keys (or the last `keys`) for KV head kv_head (the item's h-th).
  void step(int seq, int kv_head, int h, int k0, int keys, int k_begin, int k_end) {
    const int tiles = (keys + 15) / 16;
    const uint16_t* kp[4];
    const uint16_t* vp[4];
    int64_t k_stride[4], v_stride[4];
    locate_tiles(seq, kv_head, k0, tiles, k_begin, k_end, kp, k_stride, vp, v_stride);
    const auto* vb = reinterpret_cast<const int32_t*>(base_ + lay_.vis);
    const int32_t* ve = vb + head_rows_;
    float* st = base_ + lay_.st;
    auto* pa = reinterpret_cast<uint16_t*>(base_ + lay_.pa);
    for (int r0 = 0; r0 < rows_; r0 += 16) {
      float* o = o_of(h) + int64_t{r0} * dv_;
      amx_scores(kp, k_stride, tiles, qt_of(h) + int64_t{r0} * d_, d_, st);
      amx_softmax(st, keys, k0, vb + r0, ve + r0, p_.scale * p_.k_scale, p_.soft_cap, m_of(h) + r0,
                  l_of(h) + r0, o, dv_, pa);
      amx_values(o, dv_, pa, vp, v_stride, tiles);
    }
  }

  // One step of kAmxPairStepKeys keys (or the last `keys`) for KV head kv_head, its rows in
  // two or more groups (kernels/cpu/amx_tiles.h's key-pair form): V's rows interleaved by key
  // pairs once, then the groups two at a time in 2 x 2 tile blocks, a last odd one alone.
  void pair_step(int seq, int kv_head, int h, int k0, int keys, int k_begin, int k_end) {
    constexpr int kTiles = kAmxPairStepKeys / 16;
    const int tiles = (keys + 15) / 16, chunks = (keys + 31) / 32;
    const uint16_t* kp[kTiles];
    const uint16_t* vp[kTiles];
    int64_t k_stride[kTiles], v_stride[kTiles];
    locate_tiles(seq, kv_head, k0, tiles, k_begin, k_end, kp, k_stride, vp, v_stride);
    auto* vi = reinterpret_cast<uint16_t*>(base_ + lay_.vi);
    amx_interleave_values(vp, v_stride, tiles, dv_, vi);
    const auto* vb = reinterpret_cast<const int32_t*>(base_ + lay_.vis);
    const int32_t* ve = vb + head_rows_;
    float* st0 = base_ + lay_.st;
    float* st1 = st0 + int64_t{kAmxPairStepKeys} * 16;
    auto* pa0 = reinterpret_cast<uint16_t*>(base_ + lay_.pa);
    uint16_t* pa1 = pa0 + int64_t{kAmxPairStepKeys} * 16;
    const float scale = p_.scale * p_.k_scale;
    int r0 = 0;
    for (; r0 + 32 <= head_rows_; r0 += 32) {
      const int r1 = r0 + 16;
      float* o0 = o_of(h) + int64_t{r0} * dv_;
      float* o1 = o_of(h) + int64_t{r1} * dv_;
      amx_scores2(kp, k_stride, tiles, qt_of(h) + int64_t{r0} * d_, qt_of(h) + int64_t{r1} * d_, d_,
                  st0, st1);
      amx_softmax<AmxPLayout::kKeyPairs>(st0, keys, k0, vb + r0, ve + r0, scale, p_.soft_cap,
                                         m_of(h) + r0, l_of(h) + r0, o0, dv_, pa0);
      amx_softmax<AmxPLayout::kKeyPairs>(st1, keys, k0, vb + r1, ve + r1, scale, p_.soft_cap,
                                         m_of(h) + r1, l_of(h) + r1, o1, dv_, pa1);
      amx_values_pairs2(o0, o1, dv_, pa0, pa1, vi, chunks);
    }
    if (r0 < head_rows_) {
      float* o = o_of(h) + int64_t{r0} * dv_;
      for (int t = 0; t < tiles; t += 4) {
        amx_scores(kp + t, k_stride + t, std::min(4, tiles - t), qt_of(h) + int64_t{r0} * d_, d_,
                   st0 + int64_t{256} * t);
      }
      amx_softmax<AmxPLayout::kKeyPairs>(st0, keys, k0, vb + r0, ve + r0, scale, p_.soft_cap,
                                         m_of(h) + r0, l_of(h) + r0, o, dv_, pa0);
      amx_values_pairs(o, dv_, pa0, vi, chunks);
    }
  }

  const attnkit::PagedAttentionParams& p_;
  float* partials_;
  float* base_;
  attnkit::cpu::FlashAmxLayout lay_;
  attnkit::MaskRule mask_;
  int group_ = 1, d_ = 0, dv_ = 0;
  int rows_ = 0, head_rows_ = 0, heads_ = 1;
  int64_t tok0_ = 0;
};

// Rows per KV head from which an item takes the tile kernels. Below it (decode with GQA
// groups under 8) a 16-row tile is mostly padding and the avx512_bf16 dot kernels are
// faster: 32/8 d128 decode (4 rows) ran at 14.3 GB/s with them against 11.7 with tiles; at 8
// rows the tiles win, 64/8 d64 decode 12.1-12.4 against 10.1-10.3 GB/s
// (bench/results/cpu_flash.md).
inline constexpr int kAmxMinRows = 8;

// The tile kernel for items of kAmxMinRows or more rows per KV head, flash_kernel_impl.h's
// bf16 kernel (with dot products where the CPU has them) for the others; both in the same
// thread scratch (the plan sizes it for either).
template <bool kDot>
class AmxOrDotKernel {
 public:
  AmxOrDotKernel(const attnkit::PagedAttentionParams& p, const attnkit::cpu::FlashPlan& plan,
                 float* scratch, float* partials)
      : tiles_(p, plan, scratch, partials),
        simd_(p, plan, scratch, partials),
        group_(p.num_heads / p.num_kv_heads) {}
  void run(const attnkit::cpu::FlashWorkItem& it) {
    if ((it.q_end - it.q_begin) * group_ >= kAmxMinRows) {
      tiles_.run(it);
    } else {
      simd_.run(it);
    }
  }

 private:
  AmxItemKernel tiles_;
  ItemKernel<attnkit::cpu::KvBf16, kDot> simd_;
  int group_;
};

inline void run_plan_amx(const attnkit::PagedAttentionParams& p,
                         const attnkit::cpu::FlashPlan& plan, attnkit::cpu::FlashWorkspace& ws,
                         bool bf16_dot) {
  if (bf16_dot) {
    run_plan_with<AmxOrDotKernel<true>>(p, plan, ws);
  } else {
    run_plan_with<AmxOrDotKernel<false>>(p, plan, ws);
  }
}
