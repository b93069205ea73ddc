#pragma once
// CUDA_FLASH's large-row (prefill) kernel for Hopper, sm_90a: warp-specialised, with the
// matrix products on wgmma (FlashAttention-3's structure, over the paged KV cache).
//
// One CTA runs one CudaWorkItem for one KV head (grid = items x num_kv_heads), 128 rows
// (token, query head of the GQA group) against the keys [kv_begin, kv_end), in tiles of BN
// keys. Three warpgroups:
//   producer (warps 0-3, registers lowered to kProducerRegs): copies K/V tiles from the
//     cache into a STAGES-deep ring in shared memory: with C::kCopyEngine (head size 64)
//     whole tiles of a paged cache by the copy engine (TMA, one load per block and
//     64-column slab, WgmmaKvMaps), the rest with cp.async (one block-table lookup per
//     key; out-of-range keys zero-filled); fp8 caches through staging buffers, converted
//     to fp16 by the producer (produce_fp8_kv_tiles; bf16 queries are then brought into
//     fp16 row by row, WgmmaConsumer::load_q). In a launch that also writes the cache
//     (kFold), whole tiles of the step's own keys come from the K/V inputs by the copy
//     engine (one load per 64-column slab, WgmmaKvMaps::fresh_k/fresh_v). Per stage, K and V each
//     have a "full" mbarrier (every producer thread arrives, and the copy engine's bytes or the
//     thread's cp.async copies land) and an "empty" one (every consumer warp arrives when it no
//     longer reads them); the producer waits on "empty" before reusing a stage, so K of the next
//     tiles streams in while V of the current one is still in use.
//   two consumers (warps 4-7 and 8-11, registers raised to kConsumerRegs): 64 rows each,
//     Q in shared memory. Per tile t: S_t = Q K_t^T (wgmma, both operands from shared
//     memory) and O += P_{t-1} V_{t-1} (wgmma, P from registers, V MN-major from shared
//     memory) are issued back to back; the masking and online softmax of S_t run on the
//     CUDA cores while P V still occupies the tensor cores (FlashAttention-3's
//     intra-warpgroup overlap). With kPingPong (the default) the two consumers take turns
//     issuing their products (named barriers), so one's softmax also overlaps the other's
//     matrix products; they share no other synchronisation.
// Q comes by the copy engine where a map describes it (WgmmaKvMaps::q: folded launches,
// groups dividing 64), otherwise by cp.async.
// The epilogue stages each consumer's output tile in its (then free) Q buffer and writes
// it by the copy engine (WgmmaKvMaps::o, whole 64-row tiles) or as 16-byte rows, or writes
// split-KV partials, merged by the group's last CTA
// (flash_split_merge.cuh) over the consumer threads.
// With kFold (16-bit caches; can_fold_cache_update) the launch also does the step's cache
// update: the producer reads the step's own keys from the inputs and, after its last
// copies, writes its rows' tokens' K/V into the cache from the stages (produce_kv_tiles).
// Named barriers: 1 the split merge, 2-3 each consumer's own, 4-5 the ping-pong, 6 the
// folded write done (before a split merge reuses the shared memory).
//
// Shared memory (1024-byte aligned, every tile 128-byte swizzled, wgmma_primitives.cuh):
//   Q [2 consumers][D/64 slabs][64 rows][64] | stage s: K [D/64][BN][64], V [D/64][BN][64]
//   | fp8 caches: staging buffer b: K [BN][D], V [BN][D] (bytes, unswizzled)
//   | full_k, full_v, empty_k, empty_v mbarriers [STAGES] each
//   | fp8 caches: the consumers' Q rows' 2^-shift [2 consumers][64] floats

#include <type_traits>

#include "backends/cuda_flash/flash_kernels.h"
#include "backends/cuda_flash/flash_split_merge.cuh"
#include "backends/cuda_flash/flash_trace.cuh"
#include "backends/cuda_flash/flash_wgmma_config.cuh"
#include "backends/cuda_flash/flash_wgmma_producer.cuh"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/fp8_convert.cuh"
#include "kernels/cuda/mma_primitives.cuh"
#include "kernels/cuda/wgmma_primitives.cuh"

namespace attnkit::cuda {

inline constexpr int kFoldWrittenBarrier = 6;  // see above

// One consumer warpgroup: 64 packed rows from row_begin + 64 wg, with its online-softmax
// state in registers (S of the current tile, unnormalised O, row maxima m in log2 units,
// row sums l, P of the previous tile as wgmma A fragments).
template <typename T, typename C>
struct WgmmaConsumer {
  static constexpr int D = C::D, BN = C::BN, STAGES = C::STAGES, kChunks = C::kChunks;
  // The matrix products' operand type: T, or fp16 over an fp8 cache (produce_fp8_kv_tiles),
  // with bf16 queries brought into fp16's range row by row (kScaledQ, load_q).
  using TC = std::conditional_t<C::kFp8, __half, T>;
  static constexpr bool kScaledQ = !std::is_same_v<TC, T>;

  // What decides which tiles need the mask: the positions of this consumer's first and
  // last rows, and the visible keys of this thread's two rows.
  struct TileMaskBounds {
    int pos_min, pos_max;
    KeyWindow windows[2];
  };

  const PagedAttentionParams& p;
  const CudaWorkItem item;
  const WgmmaSmem<C> smem;
  const int kv_head, group;
  const int warp, lane, wg, ctid, g, t;
  const int kv_begin, kv_end, num_tiles;
  const int wg_row0;  // first packed row of this consumer
  const int row0;     // packed row of this thread's accumulator row h = 0 (h = 1: + 8)
  const uint32_t q_base;
  // Scores are dot products with the stored keys: an fp8 cache's k_scale joins the
  // softmax scale, its v_scale the output's normalisation.
  const float score_scale;
  const float scale_log2;
  const bool soft_cap;
  const float cap_in, cap_out;
  const float v_scale;
  // kScaledQ: 2^-shift of this thread's two rows (h = 0, 1), taking their scores back.
  float q_unscale[2] = {1.0f, 1.0f};
  float s[BN / 2];
  float o[D / 2];
  float m[2], l[2];
  float alpha[2];  // rescales the running O and l to the new row maxima
  uint32_t pf[BN / 16][4];

  __device__ __forceinline__ WgmmaConsumer(const PagedAttentionParams& params,
                                           const CudaWorkItem& work, int head,
                                           const WgmmaSmem<C>& window)
      : p(params),
        item(work),
        smem(window),
        kv_head(head),
        group(params.num_heads / params.num_kv_heads),
        warp(threadIdx.x >> 5),
        lane(threadIdx.x & 31),
        wg((warp >> 2) - 1),
        ctid(threadIdx.x & 127),
        g(lane >> 2),
        t(lane & 3),
        kv_begin(work.kv_begin),
        kv_end(work.kv_end),
        num_tiles((work.kv_end - work.kv_begin + BN - 1) / BN),
        wg_row0(work.row_begin + wg * 64),
        row0(wg_row0 + (warp & 3) * 16 + g),
        q_base(window.base + static_cast<uint32_t>(wg) * C::kQBytes),
        score_scale(C::kFp8 ? params.scale * params.k_scale : params.scale),
        scale_log2(score_scale * kLog2e),
        soft_cap(params.soft_cap > 0.0f),
        cap_in(soft_cap ? score_scale / params.soft_cap : 0.0f),
        cap_out(soft_cap ? params.soft_cap / score_scale : 0.0f),
        v_scale(C::kFp8 ? params.v_scale : 1.0f) {}

  // Shared address of 16-byte chunk c of row r of this consumer's Q, swizzled like the K/V
  // slabs.
  __device__ __forceinline__ uint32_t q_chunk(int r, int c) const {
    return q_base + (c >> 3) * C::kQSlabBytes + r * 128u +
           static_cast<uint32_t>(((c & 7) ^ (r & 7)) << 4);
  }

  // Timing ablation (bit 1): Q filled from registers, no global load.
  __device__ __forceinline__ void fill_q_pattern() {
    using namespace sm90;
    for (int i = ctid; i < 64 * kChunks; i += 128) {
      const int r = i / kChunks, c = i % kChunks;
      uint32_t w[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int x = (r * 131 + (c * 8 + 2 * e) * 31) % 61;
        w[e] = pack2<TC>((x - 30) * 0.03f, (x % 7 - 3) * 0.05f);
      }
      const uint32_t dst = q_chunk(r, c);
      asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(dst), "r"(w[0]), "r"(w[1]),
                   "r"(w[2]), "r"(w[3])
                   : "memory");
    }
    fence_proxy_async();
    named_barrier_sync(2 + wg, 128);
  }

  // Q (rows past row_end zero-filled), swizzled like the K/V slabs. With a Q map
  // (maps.q_rows, 16-bit caches) the copy engine brings the consumer's 64 rows, one box per
  // slab, and rows past row_end hold whatever the map reads there (other tokens' queries,
  // zeros past the last token): each row's scores, softmax and output are its own, and
  // those rows' outputs are not written.
  __device__ __forceinline__ void load_q(const WgmmaKvMaps& maps) {
    using namespace sm90;
    if constexpr (!kScaledQ) {
      if (maps.q_rows == 64) {
        const uint32_t bar = smem.q_full + 8u * static_cast<uint32_t>(wg);
        if (ctid == 0) {
          mbarrier_arrive_expect_tx(bar, C::kQBytes);
#pragma unroll
          for (int j = 0; j < C::kSlabs; ++j) {
            tma_load_3d(q_base + j * C::kQSlabBytes, &maps.q, j * 64, kv_head * group,
                        item.q_start + wg_row0 / group, bar);
          }
        }
        mbarrier_wait(bar, 0);
        return;
      }
    }
    for (int i = ctid; i < 64 * kChunks; i += 128) {
      const int r = i / kChunks, c = i % kChunks;
      const int row = wg_row0 + r;
      const T* src = static_cast<const T*>(p.q);
      int bytes = 0;
      if (row < item.row_end) {
        src += (item.q_start + row / group) * p.q_token_stride +
               (kv_head * group + row % group) * p.q_head_stride + c * 8;
        bytes = 16;
      }
      cp_async_16(q_chunk(r, c), src, bytes);
    }
    cp_async_commit();
    cp_async_wait<0>();
    if constexpr (kScaledQ) {
      named_barrier_sync(2 + wg, 128);  // rows were loaded by other threads
      q_rows_to_fp16();
    }
    fence_proxy_async();
    named_barrier_sync(2 + wg, 128);
    if constexpr (kScaledQ) {
      const float* unscale = reinterpret_cast<const float*>(smem.data + C::kQUnscaleOffset);
      q_unscale[0] = unscale[row0 - item.row_begin];
      q_unscale[1] = unscale[row0 + 8 - item.row_begin];
    }
  }

  // kScaledQ: each bf16 row of this consumer's Q, in place, as fp16 times 2^shift
  // (fp16_row_shift, as the fp8 decode's load_q_fragments_fp8); 2^-shift to the row's slot
  // after the barriers. Two threads per row, half of its 16-byte chunks each.
  __device__ __forceinline__ void q_rows_to_fp16() const {
    constexpr int kHalf = kChunks / 2;
    const int r = ctid >> 1, first = (ctid & 1) * kHalf;
    uint4 v[kHalf];
    float big = 0.0f;
#pragma unroll
    for (int i = 0; i < kHalf; ++i) {
      const int c = first + i;
      const uint32_t at = q_chunk(r, c);
      asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                   : "=r"(v[i].x), "=r"(v[i].y), "=r"(v[i].z), "=r"(v[i].w)
                   : "r"(at));
      const uint32_t w[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float2 f = unpack2<T>(w[k]);
        big = fmaxf(big, fmaxf(fabsf(f.x), fabsf(f.y)));
      }
    }
    big = fmaxf(big, __shfl_xor_sync(0xffffffffu, big, 1));
    const int shift = fp16_row_shift(big);
    const float scale = ldexpf(1.0f, shift);
#pragma unroll
    for (int i = 0; i < kHalf; ++i) {
      const int c = first + i;
      const uint32_t at = q_chunk(r, c);
      uint32_t h[4];
      const uint32_t w[4] = {v[i].x, v[i].y, v[i].z, v[i].w};
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float2 f = unpack2<T>(w[k]);
        h[k] = pack2<__half>(f.x * scale, f.y * scale);
      }
      asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(at), "r"(h[0]), "r"(h[1]),
                   "r"(h[2]), "r"(h[3])
                   : "memory");
    }
    if ((ctid & 1) == 0) {
      reinterpret_cast<float*>(smem.data + C::kQUnscaleOffset)[wg * 64 + r] = ldexpf(1.0f, -shift);
    }
  }

  // The pipeline over every tile (below), then the row sums across the quad.
  __device__ __forceinline__ void attend() {
    const int pos_base = item.kv_len - item.q_len;  // position of token 0
    const int wg_last = min(item.row_end, wg_row0 + 64) - 1;
    const TileMaskBounds bounds{pos_base + wg_row0 / group,
                                pos_base + max(wg_last, wg_row0) / group,
                                {visible_keys(p, pos_base + row0 / group, kv_end),
                                 visible_keys(p, pos_base + (row0 + 8) / group, kv_end)}};
#pragma unroll
    for (int i = 0; i < BN / 2; ++i) s[i] = 0.0f;
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      m[h] = -INFINITY;
      l[h] = 0.0f;
    }
    run_tiles(bounds);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 1);
      l[h] += __shfl_xor_sync(0xffffffffu, l[h], 2);
    }
  }

  // Software pipeline over the tiles (intra-warpgroup overlap): S of tile t and P V of
  // tile t - 1 are issued back to back, then the softmax of tile t runs while the tensor
  // cores still compute P V. K of a stage is released once its S is done, V once its
  // P V is.
  __device__ __forceinline__ void run_tiles(const TileMaskBounds& bounds) {
    using namespace sm90;
    const uint64_t q_desc = make_smem_desc(q_base, 16, 1024);
    const uint64_t k_desc = make_smem_desc(smem.base + C::kKvOffset, 16, 1024);
    const uint64_t v_desc =
        make_smem_desc(smem.base + C::kKvOffset + C::kTileBytes, C::kSlabBytes, 1024);
    if constexpr (C::kPingPong) {
      if (wg == 0) named_barrier_arrive(4, 256);
    }
    if (num_tiles > 0) {
      mbarrier_wait(smem.full_k + 0, 0);
      flash_trace(kTraceFirstTile, threadIdx.x == 128);
      fence_proxy_async();
      begin_turn();
      wgmma_fence();
      issue_s(q_desc, k_desc, 0);
      end_turn();
      wgmma_wait<0>();
      fence_operands(s);
      release(smem.empty_k + 0);
      softmax_tile(0, bounds);
      pack_p();
      flash_trace(kTraceFirstPacked, threadIdx.x == 128);
    }
    for (int tile = 1; tile < num_tiles; ++tile) {
      const int stage = tile % STAGES;
      const int prev = (tile - 1) % STAGES;
      const uint32_t parity = (tile / STAGES) & 1;
      rescale_o();  // to the maxima of tile - 1, before its P V joins O
      mbarrier_wait(smem.full_k + 8u * stage, parity);
      mbarrier_wait(smem.full_v + 8u * prev, ((tile - 1) / STAGES) & 1);
      fence_proxy_async();
      begin_turn();
      wgmma_fence();
      issue_s(q_desc, k_desc, stage);
      issue_pv(v_desc, prev);
      end_turn();
      wgmma_wait<1>();  // S of this tile (P V may still run)
      fence_operands(s);
      release(smem.empty_k + 8u * stage);
      softmax_tile(tile, bounds);
      wgmma_wait<0>();
      fence_pv_operands();
      release(smem.empty_v + 8u * prev);
      pack_p();
    }
    if (num_tiles > 0) {
      flash_trace(kTraceLastPacked, threadIdx.x == 128);
      const int last = (num_tiles - 1) % STAGES;
      rescale_o();
      mbarrier_wait(smem.full_v + 8u * last, ((num_tiles - 1) / STAGES) & 1);
      fence_proxy_async();
      begin_turn();
      wgmma_fence();
      issue_pv(v_desc, last);
      end_turn();
      wgmma_wait<0>();
      fence_pv_operands();
    }
  }

  // Turns (kPingPong): consumer c issues after barrier 4 + c has seen its own 128 threads
  // and the other consumer's 128 (or, for consumer 0's first turn, its own arrival in
  // run_tiles); it then hands the turn over. Both consumers take num_tiles + 1 turns.
  __device__ __forceinline__ void begin_turn() const {
    if constexpr (C::kPingPong) sm90::named_barrier_sync(4 + wg, 256);
  }
  __device__ __forceinline__ void end_turn() const {
    if constexpr (C::kPingPong) sm90::named_barrier_arrive(4 + (wg ^ 1), 256);
  }

  // S = Q K^T of the tile in `stage` (both operands from shared memory).
  __device__ __forceinline__ void issue_s(uint64_t q_desc, uint64_t k_desc, int stage) {
    using namespace sm90;
    const uint32_t stage_off = static_cast<uint32_t>(stage) * 2u * C::kTileBytes;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      const uint32_t in_slab = static_cast<uint32_t>(ks & 3) * 32u;
      wgmma_ss<BN, TC>(s, desc_advance(q_desc, (ks >> 2) * C::kQSlabBytes + in_slab),
                       desc_advance(k_desc, stage_off + (ks >> 2) * C::kSlabBytes + in_slab),
                       ks > 0 ? 1 : 0);
    }
    wgmma_commit();
  }

  // O += P V of the tile in `stage` (P from registers, V MN-major from shared memory).
  __device__ __forceinline__ void issue_pv(uint64_t v_desc, int stage) {
    using namespace sm90;
    const uint32_t stage_off = static_cast<uint32_t>(stage) * 2u * C::kTileBytes;
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      wgmma_rs_tb<D, TC>(o, pf[kk], desc_advance(v_desc, stage_off + kk * 16u * 128u), 1);
    }
    wgmma_commit();
  }

  __device__ __forceinline__ void fence_pv_operands() {
    sm90::fence_operands(o);
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) sm90::fence_operands(pf[kk]);
  }

  // This warp no longer reads the stage behind `bar`.
  __device__ __forceinline__ void release(uint32_t bar) const {
    __syncwarp();
    if (lane == 0) sm90::mbarrier_arrive(bar);
  }

  // Scores of one tile -> probabilities (fp32, in place in s) and alpha.
  __device__ __forceinline__ void softmax_tile(int tile, const TileMaskBounds& bounds) {
    if constexpr ((kWgmmaAblate & 8) != 0) {
      alpha[0] = alpha[1] = 1.0f;
      return;
    }
    // kScaledQ: the scores are 2^shift times too large, per row (q_unscale): the soft-cap's
    // input scale and the exponent's scale absorb that.
    if (soft_cap) {
#pragma unroll
      for (int i = 0; i < BN / 2; ++i) {
        s[i] = cap_out * fast_tanh(s[i] * (kScaledQ ? cap_in * q_unscale[(i >> 1) & 1] : cap_in));
      }
    }
    const int kb = kv_begin + tile * BN;
    const bool need_mask =
        kb + BN > kv_end ||
        (p.causal && (kb + BN - 1 > bounds.pos_min || p.chunk_size > 0 ||
                      (p.sliding_window > 0 && kb <= bounds.pos_max - p.sliding_window)));
    if (need_mask) {
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = kb + j * 8 + 2 * t + (e & 1);
          const KeyWindow& w = bounds.windows[e >> 1];
          if (key < w.lo || key > w.hi) s[4 * j + e] = -INFINITY;
        }
      }
    }
    // Online softmax (as flash_kernel.cuh): rows g (h = 0) and g + 8 (h = 1). The row
    // maxima and sums run as four independent chains each (then combined), not one
    // serial chain of BN / 4 dependent operations.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float row_scale_log2 = kScaledQ && !soft_cap ? scale_log2 * q_unscale[h] : scale_log2;
      float mx4[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
        mx4[j & 3] = fmaxf(mx4[j & 3], fmaxf(s[4 * j + 2 * h], s[4 * j + 2 * h + 1]));
      }
      float mx = fmaxf(fmaxf(mx4[0], mx4[1]), fmaxf(mx4[2], mx4[3]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m[h], mx * row_scale_log2);
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;
      alpha[h] = fast_exp2(m[h] - m_use);
      m[h] = m_new;
      float sum4[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int j = 0; j < BN / 8; ++j) {
#pragma unroll
        for (int e = 2 * h; e < 2 * h + 2; ++e) {
          const float pv = fast_exp2(fmaf(s[4 * j + e], row_scale_log2, -m_use));
          s[4 * j + e] = pv;
          sum4[j & 3] += pv;
        }
      }
      l[h] = l[h] * alpha[h] + ((sum4[0] + sum4[1]) + (sum4[2] + sum4[3]));
    }
  }

  // P as the A operand of O += P V: the S accumulators of two adjacent n8 tiles form one
  // A fragment.
  __device__ __forceinline__ void pack_p() {
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      pf[kk][0] = pack2<TC>(s[8 * kk + 0], s[8 * kk + 1]);
      pf[kk][1] = pack2<TC>(s[8 * kk + 2], s[8 * kk + 3]);
      pf[kk][2] = pack2<TC>(s[8 * kk + 4], s[8 * kk + 5]);
      pf[kk][3] = pack2<TC>(s[8 * kk + 6], s[8 * kk + 7]);
    }
  }

  // Rescales O to the new maxima; skipped by a warp whose rows' maxima all stayed put
  // (alpha exactly 1), the common case once the maxima settle.
  __device__ __forceinline__ void rescale_o() {
    if (!__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) return;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      o[4 * j + 0] *= alpha[0];
      o[4 * j + 1] *= alpha[0];
      o[4 * j + 2] *= alpha[1];
      o[4 * j + 3] *= alpha[1];
    }
  }

  // Split-KV partial: rows normalised by their own sum, plus the log2-sum-exp.
  __device__ __forceinline__ void write_partial(float* partial_o, float* partial_lse) const {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int row = row0 + 8 * h;
      if (row >= item.row_end) continue;
      const int64_t slot_row =
          static_cast<int64_t>(item.partial_base + (row / group) * item.num_splits + item.split) *
              p.num_heads +
          kv_head * group + row % group;
      const float inv = l[h] > 0.0f ? v_scale / l[h] : 0.0f;
      T* dst = reinterpret_cast<T*>(partial_o) + slot_row * D + 2 * t;
#pragma unroll
      for (int j = 0; j < D / 8; ++j) {
        *reinterpret_cast<uint32_t*>(dst + 8 * j) =
            pack2<T>(o[4 * j + 2 * h] * inv, o[4 * j + 2 * h + 1] * inv);
      }
      if (t == 0) partial_lse[slot_row] = l[h] > 0.0f ? m[h] + log2f(l[h]) : -INFINITY;
    }
  }

  // The output rows (with the sinks' share of the denominator): staged in this consumer's
  // Q buffer (its S products are complete), row-major with 16-byte chunks swizzled by row,
  // then written as whole 16-byte chunks.
  // With an output map (maps.o_rows) and all 64 rows below row_end, the tile is staged as Q
  // is laid out (64-column slabs, 128-byte rows, chunks swizzled by row: the copy engine's
  // 128-byte swizzle) and goes out by the copy engine, one box per slab; only the issuing
  // thread waits, until the copy has read the shared memory.
  __device__ __forceinline__ void write_output(const WgmmaKvMaps& maps) const {
    float factor[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      factor[h] = l[h] > 0.0f ? v_scale / l[h] : 0.0f;
      if (p.sinks != nullptr) {
        const float sink = p.sinks[kv_head * group + (row0 + 8 * h) % group] * kLog2e;
        const float ref = fmaxf(m[h], sink);
        const float denom = l[h] * safe_exp2(m[h], ref) + exp2f(sink - ref);
        factor[h] = v_scale * safe_exp2(m[h], ref) / denom;
      }
    }
    T* s_out = reinterpret_cast<T*>(smem.data + static_cast<size_t>(wg) * C::kQBytes);
    const bool by_copy_engine = kWgmmaOutTma && maps.o_rows == 64 && wg_row0 + 64 <= item.row_end;
    constexpr int kSlabElems = static_cast<int>(C::kQSlabBytes / sizeof(T));
    sm90::fence_proxy_async();
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = (warp & 3) * 16 + g + 8 * h;
#pragma unroll
      for (int j = 0; j < D / 8; ++j) {
        const int at = by_copy_engine ? (j >> 3) * kSlabElems + r * 64 + (((j & 7) ^ (r & 7)) << 3)
                                      : r * D + ((j ^ (r & 7)) << 3);
        *reinterpret_cast<uint32_t*>(s_out + at + 2 * t) =
            pack2<T>(o[4 * j + 2 * h] * factor[h], o[4 * j + 2 * h + 1] * factor[h]);
      }
    }
    if (by_copy_engine) {
      sm90::fence_proxy_async();  // the staged rows, to the copy engine
      sm90::named_barrier_sync(2 + wg, 128);
      if (ctid == 0) {
#pragma unroll
        for (int j = 0; j < C::kSlabs; ++j) {
          sm90::tma_store_3d(&maps.o, q_base + j * C::kQSlabBytes, j * 64, kv_head * group,
                             item.q_start + wg_row0 / group);
        }
        sm90::bulk_commit();
        sm90::bulk_wait_read();
      }
      return;
    }
    sm90::named_barrier_sync(2 + wg, 128);
    for (int i = ctid; i < 64 * kChunks; i += 128) {
      const int r = i / kChunks, c = i % kChunks;
      const int row = wg_row0 + r;
      if (row >= item.row_end) continue;
      T* out = static_cast<T*>(p.out) + (item.q_start + row / group) * p.o_token_stride +
               (kv_head * group + row % group) * p.o_head_stride + c * 8;
      *reinterpret_cast<uint4*>(out) =
          *reinterpret_cast<const uint4*>(s_out + r * D + ((c ^ (r & 7)) << 3));
    }
  }
};

// KV: the cache's storage type, T or an fp8 type (then C::kFp8). kFold: the launch also
// writes the step's new keys/values into the cache (`fresh`, 16-bit caches; see
// produce_kv_tiles); otherwise `fresh` is unused.
template <typename T, typename KV, typename C, bool kFold>
__global__ void __launch_bounds__(C::kThreads, 1)
    flash_wgmma_kernel(PagedAttentionParams p, const CudaWorkItem* items, float* partial_o,
                       float* partial_lse, unsigned* split_counters, CacheUpdateParams fresh,
                       const __grid_constant__ WgmmaKvMaps maps) {
  static_assert(kIsFp8<KV> ? C::kFp8 : (std::is_same_v<KV, T> && !C::kFp8),
                "fp8 caches run the configurations with staging buffers, 16-bit ones the others");
  static_assert(!kFold || !kIsFp8<KV>, "the folded cache write copies rows of the compute dtype");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(16) unsigned char smem_raw[];
  const WgmmaSmem<C> smem(smem_raw);
  flash_trace(kTraceStart, threadIdx.x == 0);
  flash_trace_sm(threadIdx.x == 0);
  let_next_grid_start();  // see flash_attention_kernel
  const CudaWorkItem item = items[blockIdx.x];
  const int kv_head = blockIdx.y;
  if (threadIdx.x == 0) smem.init_barriers();
  __syncthreads();
  // A programmatic dependent launch (kernel_launch.cuh): only the work item is read above;
  // Q, the cache, the partials and the output wait for the previous grid to finish.
  wait_for_previous_grid();
  flash_trace(kTraceWaited, threadIdx.x == 0);

  if (threadIdx.x < 128) {
    sm90::setmaxnreg_dec<C::kProducerRegs>();
    if constexpr (C::kFp8) {
      produce_fp8_kv_tiles<KV, C>(p, item, kv_head, smem);
    } else {
      produce_kv_tiles<T, C, kFold>(p, fresh, item, kv_head, smem, maps);
      flash_trace(kTraceProducerDone, threadIdx.x == 0);
      // The split merge below reuses the shared memory the folded write reads back from.
      if (kFold && item.num_splits > 1)
        sm90::named_barrier_arrive(kFoldWrittenBarrier, C::kThreads);
    }
  } else {
    sm90::setmaxnreg_inc<C::kConsumerRegs>();
    WgmmaConsumer<T, C> consumer(p, item, kv_head, smem);
    if constexpr ((kWgmmaAblate & 2) != 0) {
      consumer.fill_q_pattern();
    } else {
      consumer.load_q(maps);
    }
    flash_trace(kTraceQLoaded, threadIdx.x == 128);
    consumer.attend();
    flash_trace(kTraceLoopDone, threadIdx.x == 128);
    if (item.num_splits > 1) {
      consumer.write_partial(partial_o, partial_lse);
      if constexpr (kFold) sm90::named_barrier_sync(kFoldWrittenBarrier, C::kThreads);
      const SplitMergeArgs merge_args{p.out,           p.sinks,     p.o_token_stride,
                                      p.o_head_stride, p.num_heads, p.num_kv_heads};
      split_kv_merge_if_last<T, C>(merge_args, items + blockIdx.x, kv_head, partial_o, partial_lse,
                                   split_counters, smem.data);
    } else if constexpr ((kWgmmaAblate & 1) == 0) {
      consumer.write_output(maps);
    }
    flash_trace(kTraceResultWritten, threadIdx.x == 128);
  }
#else
  (void)p;
  (void)items;
  (void)partial_o;
  (void)partial_lse;
  (void)split_counters;
  (void)fresh;
  (void)maps;
#endif
}

}  // namespace attnkit::cuda
