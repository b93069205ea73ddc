// CUDA_PAGED: paged attention on CUDA cores, for any head size that is a multiple of 16 up
// to 256 and K/V stored as fp16, bf16 or fp8 (e4m3/e5m2, dequantised with k/v_scale).
//
// One CTA (4 warps) runs one CudaWorkItem of up to kRows = 4 packed rows for one KV head.
// The warps split the item's key range into 16-key tiles (warp w takes tiles w, w+4, ...)
// and each keeps its own online-softmax state; the epilogue merges the four states in
// shared memory. Each warp streams its tiles' K and V rows into its own ring of kStages
// shared-memory stages with cp.async, kStages - 1 tiles ahead of the one it computes: the
// bytes in flight live in shared memory, not in registers, so a warp keeps a whole tile's
// loads outstanding while it computes (registers bounded the loads in flight of the
// version before, which read K/V straight into registers: 41-43% of the read ceiling).
//
// Scores: L lanes per key (L = 2..16, a power of two covering head_size / 16), each lane
// holding 16 of the 4 rows' query elements in registers as fp32; the L partial dot
// products meet by shuffles and the scores go through shared memory to the softmax lanes
// (lane k and k + 16 own key k of the tile). P * V: each lane owns one 8-element chunk of
// the output row for all 4 rows and takes one value row per pass, with the keys' p as a
// broadcast from shared memory.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <string>
#include <type_traits>

#include "backends/cuda_paged/paged_kernels.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/mma_primitives.cuh"
#include "kernels/cuda/split_kv_combine.cuh"

namespace attnkit::cuda {
namespace {

constexpr int kRows = 4;  // packed rows per CTA
constexpr int kWarps = 4;
constexpr int kTile = 16;  // keys per warp tile
constexpr int kMaxHead = 256;
// Shared-memory stages of each warp's ring: the tile it computes and kStages - 1 in flight.
// ATTNKIT_CUDA_PAGED_STAGES overrides it at build time (A/B builds of the library).
#ifdef ATTNKIT_CUDA_PAGED_STAGES
constexpr int kStages = ATTNKIT_CUDA_PAGED_STAGES;
#else
constexpr int kStages = 2;
#endif
static_assert(kStages == 2 || kStages == 3, "2 or 3 stages (3 at head size 256 fills 192 KiB)");

struct Fp8E4M3Tag {};
struct Fp8E5M2Tag {};

template <typename Kv>
inline constexpr int kKvBytes = sizeof(Kv) == 2 ? 2 : 1;

// Eight consecutive cache elements in shared memory as floats (16 bytes for 16-bit
// types, 8 for fp8).
template <typename Kv>
__device__ __forceinline__ void smem8(const unsigned char* src, float (&out)[8]) {
  if constexpr (kKvBytes<Kv> == 2) {
    const uint4 raw = *reinterpret_cast<const uint4*>(src);
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 f = unpack2<Kv>(words[i]);
      out[2 * i] = f.x;
      out[2 * i + 1] = f.y;
    }
  } else {
    constexpr __nv_fp8_interpretation_t kind =
        std::is_same_v<Kv, Fp8E5M2Tag> ? __NV_E5M2 : __NV_E4M3;
    const uint2 raw = *reinterpret_cast<const uint2*>(src);
    const uint32_t words[2] = {raw.x, raw.y};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const __nv_fp8x2_storage_t pair =
          static_cast<__nv_fp8x2_storage_t>(words[i / 2] >> (16 * (i % 2)));
      const float2 f = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(pair, kind)));
      out[2 * i] = f.x;
      out[2 * i + 1] = f.y;
    }
  }
}

// Eight consecutive elements of the query (global memory, 16 bytes) as floats.
template <typename T>
__device__ __forceinline__ void global8(const T* src, float (&out)[8]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(src);
  const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = unpack2<T>(words[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The shapes of one warp's work, from the head size and the cache's element size (the
// same on the host, which sizes the shared memory, and on the device).
struct PagedShape {
  int chunks;         // 8-element chunks of a row (head_size / 8)
  int row_slots;      // 16-byte slots of a cached row (the cp.async granularity)
  int lanes_per_key;  // L: lanes that score one key (16 query elements each)
  int k_stride;       // bytes between staged K rows
  int v_stride;       // bytes between staged V rows
  int stage_bytes;    // one stage: kTile K rows and kTile V rows

  __host__ __device__ static PagedShape of(int head_size, int kv_bytes) {
    PagedShape s{};
    s.chunks = head_size / 8;
    s.row_slots = head_size * kv_bytes / 16;
    const int needed = (head_size + 15) / 16;
    s.lanes_per_key = 2;
    while (s.lanes_per_key < needed) s.lanes_per_key *= 2;
    // Bank conflicts of the score reads: one LDS.128 phase (8 lanes) reads 8 / L keys, L
    // consecutive slots each; with L < 8 the keys' rows must start L slots apart modulo
    // the 8 slots of the banks, so the K stride is padded to L modulo 8 slots.
    int k_slots = s.row_slots;
    if (s.lanes_per_key < 8) {
      while (k_slots % 8 != s.lanes_per_key) ++k_slots;
    }
    s.k_stride = k_slots * 16;
    // The value reads of one pass cover consecutive rows' chunks: contiguous, no padding.
    s.v_stride = s.row_slots * 16;
    s.stage_bytes = kTile * (s.k_stride + s.v_stride);
    return s;
  }
  // Dynamic shared memory of a CTA: the warps' rings, or the epilogue's partial outputs
  // (kWarps x kRows rows of fp32, laid over the rings once the loop is done).
  __host__ __device__ int smem_bytes(int head_size) const {
    const int rings = kWarps * kStages * stage_bytes;
    const int epilogue = kWarps * kRows * head_size * static_cast<int>(sizeof(float));
    return rings > epilogue ? rings : epilogue;
  }
};

// The steps of paged_attention_kernel, inlined into it: the per-lane state is passed by
// reference to arrays, every size is a compile-time constant.

// This lane's 16 query elements of the CTA's kRows packed rows as fp32 (chunks c0 and c1
// of 8 elements; zero for rows past `rows` and chunks past the row).
template <typename T>
__device__ __forceinline__ void load_q_registers(const PagedAttentionParams& p,
                                                 const CudaWorkItem& item, int kv_head, int group,
                                                 int rows, int c0, int c1, int chunks,
                                                 float (&q)[kRows][16]) {
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const int row = item.row_begin + r;
    const int token = item.q_start + row / group;
    const int head = kv_head * group + row % group;
    const T* base = static_cast<const T*>(p.q) + static_cast<int64_t>(token) * p.q_token_stride +
                    static_cast<int64_t>(head) * p.q_head_stride;
    float a[8], b[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) a[e] = b[e] = 0.0f;
    if (r < rows && c0 < chunks) global8<T>(base + c0 * 8, a);
    if (r < rows && c1 < chunks) global8<T>(base + c1 * 8, b);
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      q[r][e] = a[e];
      q[r][8 + e] = b[e];
    }
  }
}

// The physical block (paged caches) of key kb + lane % 16, the key whose row offsets the
// lane computes for issue_tile: read one tile before that tile's copies are issued, so
// that the block-table load is not a dependent round trip in front of every tile's copies.
__device__ __forceinline__ int lookup_block(const PagedAttentionParams& p, const CudaWorkItem& item,
                                            int kb, int lane) {
  const int key = kb + (lane & 15);
  if (p.block_table == nullptr || key >= item.kv_end) return 0;
  return p.block_table[static_cast<int64_t>(item.seq) * p.block_table_stride + key / p.block_size];
}

// Issues the copies of the warp's tile starting at key kb (kb < kv_end) into a stage:
// lane (key_in_copy, slot) copies slot `slot` of key row i + key_in_copy, for i in steps
// of keys_per_copy; each key's row offsets come by shuffle from the lane that computed them
// (lane k and k + 16 for key k of the tile, from `block`, lookup_block's answer). Keys past
// kv_end are not copied.
template <typename Kv>
__device__ __forceinline__ void issue_tile(const PagedAttentionParams& p, const CudaWorkItem& item,
                                           int kv_head, const PagedShape& shape, int kb, int block,
                                           unsigned char* k_stage, unsigned char* v_stage, int lane,
                                           int key_in_copy, int slot, int keys_per_copy) {
  const int key = kb + (lane & 15);
  int64_t k_row = 0, v_row = 0;
  if (key < item.kv_end) {
    if (p.block_table != nullptr) {
      const int64_t in_block = key % p.block_size;
      k_row = block * p.k_block_stride + in_block * p.k_token_stride;
      v_row = block * p.v_block_stride + in_block * p.v_token_stride;
    } else {
      const int64_t token = p.kv_start_loc[item.seq] + key;
      k_row = token * p.k_token_stride;
      v_row = token * p.v_token_stride;
    }
    k_row += kv_head * p.k_head_stride;
    v_row += kv_head * p.v_head_stride;
  }
  const unsigned char* k_cache = static_cast<const unsigned char*>(p.k_cache);
  const unsigned char* v_cache = static_cast<const unsigned char*>(p.v_cache);
  for (int i = 0; i < kTile; i += keys_per_copy) {
    const int local = i + key_in_copy;
    const int64_t k_src = __shfl_sync(0xffffffffu, k_row, local & 15);
    const int64_t v_src = __shfl_sync(0xffffffffu, v_row, local & 15);
    if (key_in_copy < keys_per_copy && local < kTile && kb + local < item.kv_end) {
      cp_async_16(k_stage + local * shape.k_stride + slot * 16,
                  k_cache + k_src * kKvBytes<Kv> + slot * 16, 16);
      cp_async_16(v_stage + local * shape.v_stride + slot * 16,
                  v_cache + v_src * kKvBytes<Kv> + slot * 16, 16);
    }
  }
}

// The raw scores q_r . k of the stage's kTile keys, into s_x[key] (a float4 of the kRows
// rows): L lanes per key, kpi = 32 / L keys per iteration, the partial dot products summed
// by shuffles within the L lanes. Rows of keys past kv_end hold stale bytes: their scores
// are masked by the softmax, never used.
template <typename Kv>
__device__ __forceinline__ void tile_scores(const unsigned char* k_stage, const PagedShape& shape,
                                            const float (&q)[kRows][16], float4* s_x, int lane,
                                            int c0, int c1) {
  const int lanes = shape.lanes_per_key;
  const int kpi = 32 / lanes;
  const int j = lane % lanes;
  for (int base = 0; base < kTile; base += kpi) {
    const int local = base + lane / lanes;
    const unsigned char* row = k_stage + local * shape.k_stride;
    float x[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) x[r] = 0.0f;
    if (c0 < shape.chunks) {
      float kf[8];
      smem8<Kv>(row + c0 * 8 * kKvBytes<Kv>, kf);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
#pragma unroll
        for (int e = 0; e < 8; ++e) x[r] += q[r][e] * kf[e];
      }
    }
    if (c1 < shape.chunks) {
      float kf[8];
      smem8<Kv>(row + c1 * 8 * kKvBytes<Kv>, kf);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
#pragma unroll
        for (int e = 0; e < 8; ++e) x[r] += q[r][8 + e] * kf[e];
      }
    }
    for (int o = lanes / 2; o > 0; o >>= 1) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) x[r] += __shfl_xor_sync(0xffffffffu, x[r], o);
    }
    if (j == 0) s_x[local] = make_float4(x[0], x[1], x[2], x[3]);
  }
}

// Online softmax over the warp's tile at kb: lane l takes key l % 16's scores from s_x,
// masks them (kv_end, padding rows, mask.h's rule), moves each row's max m to the tile's,
// rescales the lane's sum l and accumulators acc to it, and leaves the key's
// probabilities in s_x (lanes 16..31 mirror lanes 0..15 and add nothing to l).
__device__ __forceinline__ void online_softmax_update(float (&m)[kRows], float (&l)[kRows],
                                                      float (&acc)[kRows][8], float4* s_x,
                                                      const PagedAttentionParams& p,
                                                      const int (&row_pos)[kRows], int kb,
                                                      int kv_end, int rows, int lane) {
  const int local = lane & 15;
  const int key = kb + local;
  const float4 raw = s_x[local];
  const float x[kRows] = {raw.x, raw.y, raw.z, raw.w};
  float pr[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    float s = score_log2(p, x[r] * p.k_scale);
    if (key >= kv_end || r >= rows || !key_visible(p, row_pos[r], key)) s = -INFINITY;
    const float m_new = fmaxf(m[r], warp_max(s));
    const float alpha = safe_exp2(m[r], m_new);
    m[r] = m_new;
    pr[r] = safe_exp2(s, m_new);
    l[r] = l[r] * alpha + (lane < 16 ? pr[r] : 0.0f);  // per-lane partial sum
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[r][e] *= alpha;
  }
  __syncwarp();
  if (lane < 16) s_x[local] = make_float4(pr[0], pr[1], pr[2], pr[3]);
  __syncwarp();
}

// acc += P * V over the stage's keys below kv_end: pass k covers keys k*keys_per_pass ..
// +keys_per_pass-1; the lane takes chunk my_chunk of its key's value row and the key's
// probabilities from s_x.
template <typename Kv>
__device__ __forceinline__ void accumulate_pv(float (&acc)[kRows][8], const unsigned char* v_stage,
                                              const PagedShape& shape, const float4* s_x, int kb,
                                              int kv_end, int keys_per_pass, int my_key_slot,
                                              int my_chunk) {
  if (my_key_slot >= keys_per_pass) return;
  for (int base = 0; base < kTile; base += keys_per_pass) {
    const int local = base + my_key_slot;
    if (local >= kTile || kb + local >= kv_end) break;
    const float4 pk = s_x[local];
    const float pr[kRows] = {pk.x, pk.y, pk.z, pk.w};
    float vf[8];
    smem8<Kv>(v_stage + local * shape.v_stride + my_chunk * 8 * kKvBytes<Kv>, vf);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[r][e] += pr[r] * vf[e];
    }
  }
}

// Epilogue, first half: merges the lanes of the warp that hold the same chunk (different
// key slots) into s_o[warp], and publishes the warp's max and (lane-summed) sum per row.
__device__ __forceinline__ void store_warp_state(float* s_o_warp, float (&s_m)[kWarps][kRows],
                                                 float (&s_l)[kWarps][kRows],
                                                 const float (&acc)[kRows][8],
                                                 const float (&m)[kRows], const float (&l)[kRows],
                                                 int dim, int keys_per_pass, int my_key_slot,
                                                 int my_chunk, int lane, int warp) {
  for (int i = lane; i < kRows * dim; i += 32) s_o_warp[i] = 0.0f;
  __syncwarp();
  for (int slot = 0; slot < keys_per_pass; ++slot) {
    if (my_key_slot == slot) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
#pragma unroll
        for (int e = 0; e < 8; ++e) s_o_warp[r * dim + my_chunk * 8 + e] += acc[r][e];
      }
    }
    __syncwarp();
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const float sum = warp_sum(l[r]);
    if (lane == 0) {
      s_m[warp][r] = m[r];
      s_l[warp][r] = sum;
    }
  }
}

// Epilogue, second half: merges the kWarps states of each row and writes the output (the
// sink joins the denominator), or the split-KV partial row and its log2-sum-exp.
template <typename T>
__device__ __forceinline__ void write_output(const PagedAttentionParams& p,
                                             const CudaWorkItem& item, int kv_head, int group,
                                             int dim, int rows, int tid, const float* s_o,
                                             const float (&s_m)[kWarps][kRows],
                                             const float (&s_l)[kWarps][kRows], float* partial_o,
                                             float* partial_lse) {
  for (int i = tid; i < rows * dim; i += blockDim.x) {
    const int r = i / dim, d = i % dim;
    float big = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) big = fmaxf(big, s_m[w][r]);
    float sum = 0.0f, o = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float wt = safe_exp2(s_m[w][r], big);
      sum += wt * s_l[w][r];
      o += wt * s_o[(w * kRows + r) * dim + d];
    }
    o *= p.v_scale;
    const int row = item.row_begin + r;
    const int token_in_req = row / group;
    const int head = kv_head * group + row % group;
    if (item.num_splits > 1) {
      const int64_t slot_row =
          static_cast<int64_t>(item.partial_base + token_in_req * item.num_splits + item.split) *
              p.num_heads +
          head;
      partial_o[slot_row * p.head_size_v + d] = sum > 0.0f ? o / sum : 0.0f;
      if (d == 0) partial_lse[slot_row] = sum > 0.0f ? big + log2f(sum) : -INFINITY;
      continue;
    }
    float factor = sum > 0.0f ? 1.0f / sum : 0.0f;
    if (p.sinks != nullptr) {
      const float sink = p.sinks[head] * kLog2e;
      const float ref = fmaxf(big, sink);
      factor = safe_exp2(big, ref) / (sum * safe_exp2(big, ref) + exp2f(sink - ref));
    }
    static_cast<T*>(
        p.out)[(item.q_start + token_in_req) * p.o_token_stride + head * p.o_head_stride + d] =
        from_float<T>(o * factor);
  }
}

template <typename T, typename Kv>
__global__ void __launch_bounds__(kWarps * 32)
    paged_attention_kernel(PagedAttentionParams p, const CudaWorkItem* items, float* partial_o,
                           float* partial_lse) {
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ float4 s_x[kWarps][kTile];
  __shared__ float s_m[kWarps][kRows], s_l[kWarps][kRows];

  const CudaWorkItem item = items[blockIdx.x];
  const int kv_head = blockIdx.y;
  const int group = p.num_heads / p.num_kv_heads;
  const int dim = p.head_size;
  const PagedShape shape = PagedShape::of(dim, kKvBytes<Kv>);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int rows = min(kRows, item.row_end - item.row_begin);

  // The lane's query chunks for the scores: 16-bit caches put a lane's two chunks L
  // apart (the L lanes of a key read L consecutive 16-byte slots per load); fp8 caches
  // hold 16 elements per slot, so a lane's chunks are adjacent.
  const int lanes = shape.lanes_per_key;
  const int j = lane % lanes;
  const int c0 = kKvBytes<Kv> == 2 ? j : 2 * j;
  const int c1 = kKvBytes<Kv> == 2 ? j + lanes : 2 * j + 1;
  float q[kRows][16];
  load_q_registers<T>(p, item, kv_head, group, rows, c0, c1, shape.chunks, q);

  int row_pos[kRows];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    row_pos[r] = item.kv_len - item.q_len + (item.row_begin + r) / group;
  }
  float m[kRows], l[kRows], acc[kRows][8];
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[r][e] = 0.0f;
  }
  const int keys_per_pass = 32 / shape.chunks;  // value rows read per pass of the warp
  const int my_chunk = lane % shape.chunks;
  const int my_key_slot = lane / shape.chunks;  // < keys_per_pass for active value lanes
  const int keys_per_copy = 32 / shape.row_slots;
  const int key_in_copy = lane / shape.row_slots;
  const int slot = lane % shape.row_slots;

  unsigned char* ring = smem + warp * kStages * shape.stage_bytes;
  const int tiles = (item.kv_end - item.kv_begin + kTile - 1) / kTile;
  const int my_tiles = warp < tiles ? (tiles - warp + kWarps - 1) / kWarps : 0;
  auto tile_start = [&](int t) { return item.kv_begin + (warp + t * kWarps) * kTile; };
  auto stage_k = [&](int t) { return ring + (t % kStages) * shape.stage_bytes; };

#pragma unroll
  for (int t = 0; t < kStages - 1; ++t) {
    if (t < my_tiles) {
      unsigned char* k_stage = stage_k(t);
      issue_tile<Kv>(p, item, kv_head, shape, tile_start(t),
                     lookup_block(p, item, tile_start(t), lane), k_stage,
                     k_stage + kTile * shape.k_stride, lane, key_in_copy, slot, keys_per_copy);
    }
    cp_async_commit();
  }
  int next_block =
      kStages - 1 < my_tiles ? lookup_block(p, item, tile_start(kStages - 1), lane) : 0;
  for (int t = 0; t < my_tiles; ++t) {
    cp_async_wait<kStages - 2>();
    __syncwarp();  // the tile's copies (every lane's) landed; the stage before is free
    const int ahead = t + kStages - 1;
    if (ahead < my_tiles) {
      unsigned char* k_stage = stage_k(ahead);
      issue_tile<Kv>(p, item, kv_head, shape, tile_start(ahead), next_block, k_stage,
                     k_stage + kTile * shape.k_stride, lane, key_in_copy, slot, keys_per_copy);
      if (ahead + 1 < my_tiles) next_block = lookup_block(p, item, tile_start(ahead + 1), lane);
    }
    cp_async_commit();
    const int kb = tile_start(t);
    const unsigned char* k_stage = stage_k(t);
    tile_scores<Kv>(k_stage, shape, q, s_x[warp], lane, c0, c1);
    __syncwarp();
    online_softmax_update(m, l, acc, s_x[warp], p, row_pos, kb, item.kv_end, rows, lane);
    accumulate_pv<Kv>(acc, k_stage + kTile * shape.k_stride, shape, s_x[warp], kb, item.kv_end,
                      keys_per_pass, my_key_slot, my_chunk);
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with its ring: the epilogue reuses it

  float* s_o = reinterpret_cast<float*>(smem);
  store_warp_state(s_o + warp * kRows * dim, s_m, s_l, acc, m, l, dim, keys_per_pass, my_key_slot,
                   my_chunk, lane, warp);
  __syncthreads();
  write_output<T>(p, item, kv_head, group, dim, rows, tid, s_o, s_m, s_l, partial_o, partial_lse);
}

template <typename T, typename Kv>
void launch_items(const PagedAttentionParams& p, const CudaWorkItem* items, int count,
                  const DevicePlan& plan) {
  if (count == 0) return;
  static const bool configured = allow_dynamic_smem(
      paged_attention_kernel<T, Kv>, PagedShape::of(kMaxHead, 2).smem_bytes(kMaxHead));
  (void)configured;
  const int smem = PagedShape::of(p.head_size, kKvBytes<Kv>).smem_bytes(p.head_size);
  paged_attention_kernel<T, Kv>
      <<<dim3(count, p.num_kv_heads), kWarps * 32, smem, static_cast<cudaStream_t>(plan.stream)>>>(
          p, items, plan.partial_o, plan.partial_lse);
  ATTNKIT_CUDA_CHECK_LAUNCH(paged_attention_kernel);
}

template <typename T, typename Kv>
void launch_all(const PagedAttentionParams& p, const DevicePlan& plan) {
  launch_items<T, Kv>(p, plan.small_items, plan.num_small, plan);
  launch_items<T, Kv>(p, plan.large_items, plan.num_large, plan);
  launch_split_kv_combine<T>(p, plan);
}

template <typename T>
void launch_for_compute_dtype(const PagedAttentionParams& p, const DevicePlan& plan) {
  switch (p.kv_dtype) {
    case ScalarType::kFloat16:
      return launch_all<T, __half>(p, plan);
    case ScalarType::kBFloat16:
      return launch_all<T, __nv_bfloat16>(p, plan);
    case ScalarType::kFp8E4M3:
      return launch_all<T, Fp8E4M3Tag>(p, plan);
    case ScalarType::kFp8E5M2:
      return launch_all<T, Fp8E5M2Tag>(p, plan);
    default:
      throw Error(ErrorCode::kUnsupported,
                  "CUDA_PAGED: KV dtype " + std::string(to_string(p.kv_dtype)) +
                      " not supported (supported: float16, bfloat16, fp8_e4m3, fp8_e5m2)");
  }
}

}  // namespace

KernelGeometry paged_geometry(int head_size) {
  // Decode CTAs resident per SM (registers and the rings' shared memory of a 16-bit cache;
  // fp8 rings are half as large, so at least as many fit), asked of the runtime once per
  // head size.
  static std::array<std::atomic<int>, kMaxHead / 16 + 1> ctas_by_size{};
  std::atomic<int>& cached = ctas_by_size[std::clamp(head_size, 0, kMaxHead) / 16];
  int ctas = cached.load(std::memory_order_relaxed);
  if (ctas == 0) {
    using Kernel = void (*)(PagedAttentionParams, const CudaWorkItem*, float*, float*);
    const Kernel kernel = paged_attention_kernel<__nv_bfloat16, __nv_bfloat16>;
    static const bool configured =
        allow_dynamic_smem(kernel, PagedShape::of(kMaxHead, 2).smem_bytes(kMaxHead));
    (void)configured;
    ATTNKIT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &ctas, kernel, kWarps * 32, PagedShape::of(head_size, 2).smem_bytes(head_size)));
    ctas = std::max(ctas, 1);
    cached.store(ctas, std::memory_order_relaxed);
  }
  return {kRows, kRows, kWarps * kTile, ctas};
}

void launch_paged_attention(const PagedAttentionParams& p, const DevicePlan& plan) {
  if (p.head_size % 16 != 0 || p.head_size > kMaxHead || p.head_size_v != p.head_size) {
    throw Error(ErrorCode::kUnsupported,
                "CUDA_PAGED: head_size " + std::to_string(p.head_size) + " / head_size_v " +
                    std::to_string(p.head_size_v) +
                    " not supported (supported: equal, multiples of 16 up to 256)");
  }
  switch (p.q_dtype) {
    case ScalarType::kFloat16:
      return launch_for_compute_dtype<__half>(p, plan);
    case ScalarType::kBFloat16:
      return launch_for_compute_dtype<__nv_bfloat16>(p, plan);
    default:
      throw Error(ErrorCode::kUnsupported, "CUDA_PAGED: dtype " +
                                               std::string(to_string(p.q_dtype)) +
                                               " not supported (supported: float16, bfloat16)");
  }
}

}  // namespace attnkit::cuda
