#pragma once
// CUDA_FLASH: tensor-core flash attention over the paged (or contiguous) KV cache.
//
// One CTA runs one CudaWorkItem for one KV head (grid = items x num_kv_heads): kRows
// packed rows (token, query head of the GQA group) against the keys [kv_begin, kv_end),
// in tiles of BN keys streamed through shared memory by cp.async, STAGES deep. Warps form
// a WARPS_M x WARPS_N grid: warp (wm, wn) owns rows [wm*16*WM, +16*WM) and keys
// [wn*BN/WARPS_N, +BN/WARPS_N) of every tile, with its own online-softmax state
// (max m, sum l, unnormalised O in registers). The epilogue merges the WARPS_N states in
// shared memory and writes the output (or the split-KV partial).
//   prefill ("large rows"): WARPS_M = 4, WARPS_N = 1, WM = 2 -> 128 rows per CTA, each
//     K/V fragment loaded from shared memory feeds two m16 tiles.
//   decode ("small rows"):  WARPS_M = 1, WARPS_N = 4 -> 16 rows (e.g. 4 GQA heads x up to
//     4 tokens) and four warps splitting every 64-key tile (flash-decoding inside a CTA).
//
// Shared memory (T elements, 16-byte chunks XOR-swizzled by row % 8 so that ldmatrix's
// eight row addresses fall in different banks):
//   sQ [kRows][D] | stage s: sK [BN][D], sV [BN][D]
// reused after the main loop as fp32 [WARPS_N][kRows][D + 4] partial O, then m and l.

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/device_common.cuh"
#include "backends/cuda/mma_primitives.cuh"

namespace attnkit::cuda {

template <int D_, int WM_, int WARPS_M_, int WARPS_N_, int BN_, int STAGES_>
struct FlashConfig {
  static constexpr int D = D_;
  static constexpr int WM = WM_;
  static constexpr int WARPS_M = WARPS_M_;
  static constexpr int WARPS_N = WARPS_N_;
  static constexpr int BN = BN_;
  static constexpr int STAGES = STAGES_;
  static constexpr int kThreads = 32 * WARPS_M * WARPS_N;
  static constexpr int kRows = 16 * WM * WARPS_M;
  static constexpr int kWarpKeys = BN / WARPS_N;
  static constexpr int kChunks = D / 8;   // 16-byte chunks per row
  static constexpr int kOStride = D + 4;  // fp32 epilogue row stride (bank spread)
  static_assert(D % 64 == 0, "the swizzle needs at least 8 chunks per row");
  static_assert(kWarpKeys % 16 == 0, "a warp's keys form whole k16 steps of P*V");
  static_assert(STAGES >= 2, "double buffering at least");
  static constexpr size_t kMainBytes = 2u * (kRows * D + STAGES * 2 * BN * D);
  static constexpr size_t kEpilogueBytes = 4u * WARPS_N * kRows * (kOStride + 2);
  static constexpr size_t kSmemBytes = kMainBytes > kEpilogueBytes ? kMainBytes : kEpilogueBytes;
};

// Swizzled element index of (row, 16-byte chunk) in a [rows][D] tile.
template <int D>
__device__ __forceinline__ int swizzle(int row, int chunk) {
  return row * D + ((chunk ^ (row & 7)) << 3);
}

template <typename T, typename C>
__global__ void __launch_bounds__(C::kThreads)
    flash_attention_kernel(PagedAttentionParams p, const CudaWorkItem* items, float* partial_o,
                           float* partial_lse) {
  constexpr int D = C::D, BN = C::BN, WM = C::WM, kRows = C::kRows, kChunks = C::kChunks;
  constexpr int kThreads = C::kThreads, kWarpKeys = C::kWarpKeys, STAGES = C::STAGES;
  constexpr int kNT = kWarpKeys / 8;  // n8 tiles of S per warp
  constexpr int kDT = D / 8;          // n8 tiles of O per warp

  extern __shared__ __align__(16) unsigned char smem[];
  T* s_q = reinterpret_cast<T*>(smem);
  T* s_kv = s_q + kRows * D;

  const CudaWorkItem item = items[blockIdx.x];
  const int kv_head = blockIdx.y;
  const int group = p.num_heads / p.num_kv_heads;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp % C::WARPS_M, wn = warp / C::WARPS_M;
  const int kv_begin = item.kv_begin, kv_end = item.kv_end;
  const int num_tiles = (kv_end - kv_begin + BN - 1) / BN;
  const int pos_base = item.kv_len - item.q_len;  // position of token 0

  // Q tile (rows past row_end are zero-filled).
  for (int i = tid; i < kRows * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const int row = item.row_begin + r;
    const T* src = static_cast<const T*>(p.q);
    int bytes = 0;
    if (row < item.row_end) {
      const int token = item.q_start + row / group;
      const int head = kv_head * group + row % group;
      src += token * p.q_token_stride + head * p.q_head_stride + c * 8;
      bytes = 16;
    }
    cp_async_16(s_q + swizzle<D>(r, c), src, bytes);
  }

  auto load_tile = [&](int tile, int stage) {
    T* s_k = s_kv + stage * 2 * BN * D;
    T* s_v = s_k + BN * D;
    const int kb = kv_begin + tile * BN;
    for (int i = tid; i < BN * kChunks; i += kThreads) {
      const int key = i / kChunks, c = i % kChunks;
      const int kpos = kb + key;
      const T* k_src = static_cast<const T*>(p.k_cache);
      const T* v_src = static_cast<const T*>(p.v_cache);
      int bytes = 0;
      if (kpos < kv_end) {
        k_src += kv_token_offset(p, item.seq, kpos, p.k_block_stride, p.k_token_stride) +
                 kv_head * p.k_head_stride + c * 8;
        v_src += kv_token_offset(p, item.seq, kpos, p.v_block_stride, p.v_token_stride) +
                 kv_head * p.v_head_stride + c * 8;
        bytes = 16;
      }
      cp_async_16(s_k + swizzle<D>(key, c), k_src, bytes);
      cp_async_16(s_v + swizzle<D>(key, c), v_src, bytes);
    }
  };

#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < num_tiles) load_tile(s, s);
    cp_async_commit();  // group 0 also carries Q
  }

  // Per-thread rows: (mi, half) -> local row wm*16*WM + mi*16 + lane/4 + 8*half.
  int row_pos[WM][2];
#pragma unroll
  for (int mi = 0; mi < WM; ++mi) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = wm * 16 * WM + mi * 16 + (lane >> 2) + 8 * h;
      row_pos[mi][h] = pos_base + (item.row_begin + r) / group;
    }
  }
  const int last_row = min(item.row_end, item.row_begin + kRows) - 1;
  const int pos_min = pos_base + item.row_begin / group;
  const int pos_max = pos_base + last_row / group;

  float o[WM][kDT][4];
  float m[WM][2], l[WM][2];
#pragma unroll
  for (int mi = 0; mi < WM; ++mi) {
#pragma unroll
    for (int j = 0; j < kDT; ++j) o[mi][j][0] = o[mi][j][1] = o[mi][j][2] = o[mi][j][3] = 0.0f;
    m[mi][0] = m[mi][1] = -INFINITY;
    l[mi][0] = l[mi][1] = 0.0f;
  }

  for (int tile = 0; tile < num_tiles; ++tile) {
    cp_async_wait<STAGES - 2>();
    __syncthreads();
    if (tile + STAGES - 1 < num_tiles) load_tile(tile + STAGES - 1, (tile + STAGES - 1) % STAGES);
    cp_async_commit();

    const T* s_k = s_kv + (tile % STAGES) * 2 * BN * D;
    const T* s_v = s_k + BN * D;
    const int kb = kv_begin + tile * BN;

    // S = Q K^T for this warp's rows and keys.
    float s[WM][kNT][4];
#pragma unroll
    for (int mi = 0; mi < WM; ++mi)
#pragma unroll
      for (int j = 0; j < kNT; ++j) s[mi][j][0] = s[mi][j][1] = s[mi][j][2] = s[mi][j][3] = 0.0f;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      uint32_t a[WM][4];
#pragma unroll
      for (int mi = 0; mi < WM; ++mi) {
        const int r = wm * 16 * WM + mi * 16 + (lane & 15);
        ldmatrix_x4(a[mi], s_q + swizzle<D>(r, ks * 2 + (lane >> 4)));
      }
#pragma unroll
      for (int nj = 0; nj < kNT / 2; ++nj) {
        uint32_t b[4];
        const int key = wn * kWarpKeys + nj * 16 + ((lane >> 4) << 3) + (lane & 7);
        ldmatrix_x4(b, s_k + swizzle<D>(key, ks * 2 + ((lane >> 3) & 1)));
#pragma unroll
        for (int mi = 0; mi < WM; ++mi) {
          mma_16816<T>(s[mi][2 * nj], a[mi], b[0], b[1]);
          mma_16816<T>(s[mi][2 * nj + 1], a[mi], b[2], b[3]);
        }
      }
    }

    // Scores in log2 units; mask only tiles that straddle a boundary.
    const bool need_mask =
        kb + BN > kv_end ||
        (p.causal && (kb + BN - 1 > pos_min || p.chunk_size > 0 ||
                      (p.sliding_window > 0 && kb <= pos_max - p.sliding_window)));
    const float scale_log2 = p.scale * kLog2e;
#pragma unroll
    for (int mi = 0; mi < WM; ++mi) {
#pragma unroll
      for (int j = 0; j < kNT; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float x = p.soft_cap > 0.0f ? score_log2(p, s[mi][j][e]) : s[mi][j][e] * scale_log2;
          if (need_mask) {
            const int key = kb + wn * kWarpKeys + j * 8 + 2 * (lane & 3) + (e & 1);
            if (key >= kv_end || !key_visible(p, row_pos[mi][e >> 1], key)) x = -INFINITY;
          }
          s[mi][j][e] = x;
        }
      }
    }

    // Online softmax: rescale the running state to the new row maxima.
#pragma unroll
    for (int mi = 0; mi < WM; ++mi) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float mx = -INFINITY;
#pragma unroll
        for (int j = 0; j < kNT; ++j) mx = fmaxf(mx, fmaxf(s[mi][j][2 * h], s[mi][j][2 * h + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float m_new = fmaxf(m[mi][h], mx);
        const float alpha = safe_exp2(m[mi][h], m_new);
        m[mi][h] = m_new;
        float sum = 0.0f;
#pragma unroll
        for (int j = 0; j < kNT; ++j) {
#pragma unroll
          for (int e = 2 * h; e < 2 * h + 2; ++e) {
            const float pv = safe_exp2(s[mi][j][e], m_new);
            s[mi][j][e] = pv;
            sum += pv;
          }
        }
        l[mi][h] = l[mi][h] * alpha + sum;
#pragma unroll
        for (int j = 0; j < kDT; ++j) {
          o[mi][j][2 * h] *= alpha;
          o[mi][j][2 * h + 1] *= alpha;
        }
      }
    }

    // O += P V: the S accumulators of two adjacent n8 tiles are exactly one A fragment.
#pragma unroll
    for (int kk = 0; kk < kWarpKeys / 16; ++kk) {
      uint32_t a[WM][4];
#pragma unroll
      for (int mi = 0; mi < WM; ++mi) {
        a[mi][0] = pack2<T>(s[mi][2 * kk][0], s[mi][2 * kk][1]);
        a[mi][1] = pack2<T>(s[mi][2 * kk][2], s[mi][2 * kk][3]);
        a[mi][2] = pack2<T>(s[mi][2 * kk + 1][0], s[mi][2 * kk + 1][1]);
        a[mi][3] = pack2<T>(s[mi][2 * kk + 1][2], s[mi][2 * kk + 1][3]);
      }
#pragma unroll
      for (int dn = 0; dn < D / 16; ++dn) {
        uint32_t b[4];
        const int key = wn * kWarpKeys + kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
        ldmatrix_x4_trans(b, s_v + swizzle<D>(key, dn * 2 + (lane >> 4)));
#pragma unroll
        for (int mi = 0; mi < WM; ++mi) {
          mma_16816<T>(o[mi][2 * dn], a[mi], b[0], b[1]);
          mma_16816<T>(o[mi][2 * dn + 1], a[mi], b[2], b[3]);
        }
      }
    }
  }

  // Epilogue: every warp parks (m, l, O) in shared memory, then all threads merge the
  // WARPS_N states of each row and write 8 output elements at a time.
  cp_async_wait<0>();
  __syncthreads();
  float* s_o = reinterpret_cast<float*>(smem);
  float* s_m = s_o + C::WARPS_N * kRows * C::kOStride;
  float* s_l = s_m + C::WARPS_N * kRows;
#pragma unroll
  for (int mi = 0; mi < WM; ++mi) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float sum = l[mi][h];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const int r = wm * 16 * WM + mi * 16 + (lane >> 2) + 8 * h;
      float* row_o = s_o + (wn * kRows + r) * C::kOStride;
#pragma unroll
      for (int j = 0; j < kDT; ++j) {
        *reinterpret_cast<float2*>(row_o + j * 8 + 2 * (lane & 3)) =
            make_float2(o[mi][j][2 * h], o[mi][j][2 * h + 1]);
      }
      if ((lane & 3) == 0) {
        s_m[wn * kRows + r] = m[mi][h];
        s_l[wn * kRows + r] = sum;
      }
    }
  }
  __syncthreads();

  for (int i = tid; i < kRows * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const int row = item.row_begin + r;
    if (row >= item.row_end) continue;
    float big = -INFINITY;
#pragma unroll
    for (int w = 0; w < C::WARPS_N; ++w) big = fmaxf(big, s_m[w * kRows + r]);
    float sum = 0.0f, acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
    for (int w = 0; w < C::WARPS_N; ++w) {
      const float wt = safe_exp2(s_m[w * kRows + r], big);
      sum += wt * s_l[w * kRows + r];
      const float* src = s_o + (w * kRows + r) * C::kOStride + c * 8;
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[e] += wt * src[e];
    }
    const int token_in_req = row / group;
    const int head = kv_head * group + row % group;
    if (item.num_splits > 1) {
      const int64_t slot_row =
          static_cast<int64_t>(item.partial_base + token_in_req * item.num_splits + item.split) *
              p.num_heads +
          head;
      const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
      float4* dst = reinterpret_cast<float4*>(partial_o + slot_row * D + c * 8);
      dst[0] = make_float4(acc[0] * inv, acc[1] * inv, acc[2] * inv, acc[3] * inv);
      dst[1] = make_float4(acc[4] * inv, acc[5] * inv, acc[6] * inv, acc[7] * inv);
      if (c == 0) partial_lse[slot_row] = sum > 0.0f ? big + log2f(sum) : -INFINITY;
      continue;
    }
    float factor = sum > 0.0f ? 1.0f / sum : 0.0f;
    if (p.sinks != nullptr) {
      // The sink joins the denominator: rescale both terms to a common maximum.
      const float sink = p.sinks[head] * kLog2e;
      const float ref = fmaxf(big, sink);
      const float denom = sum * safe_exp2(big, ref) + exp2f(sink - ref);
      factor = safe_exp2(big, ref) / denom;
    }
    uint4 packed;
    packed.x = pack2<T>(acc[0] * factor, acc[1] * factor);
    packed.y = pack2<T>(acc[2] * factor, acc[3] * factor);
    packed.z = pack2<T>(acc[4] * factor, acc[5] * factor);
    packed.w = pack2<T>(acc[6] * factor, acc[7] * factor);
    T* out = static_cast<T*>(p.out) + (item.q_start + token_in_req) * p.o_token_stride +
             head * p.o_head_stride + c * 8;
    *reinterpret_cast<uint4*>(out) = packed;
  }
}

}  // namespace attnkit::cuda
