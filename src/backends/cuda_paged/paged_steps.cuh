#pragma once
// CUDA_PAGED's tile shapes and the steps of its kernel (paged_attention.cu, which includes
// this header once): every step is a device function inlined into the kernel, over the
// per-lane state passed by reference to arrays; every size is a compile-time constant or
// comes from PagedShape, computed alike on the host (shared-memory sizing) and the device.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "attnkit/kernels/paged_attention_params.h"
#include "backends/cuda_paged/paged_kernels.h"
#include "kernels/cuda/cuda_plan.h"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/mma_primitives.cuh"

namespace attnkit::cuda::paged {

// Packed rows per CTA (kR, a template argument of the kernel and its steps): 4, or 8 where
// paged_rows_per_cta (paged_kernels.h) says so.
constexpr int kWarps = 4;
constexpr int kMaxHead = 256;
// CTAs resident per SM that the kernel is built for: __launch_bounds__ caps the registers
// at 128 and the shared memory of a CTA stays within kCtaSmemBudget.
constexpr int kCtasPerSm = 4;
// 228 KiB of shared memory per SM (sm_90) less the 1 KiB the runtime reserves per CTA.
constexpr int kCtaSmemBudget = 228 * 1024 / kCtasPerSm - 1024;
// Stages of each warp's ring (each one K tile or one V tile): the one computed on and
// kStages - 1 in flight. ATTNKIT_CUDA_PAGED_STAGES overrides it at build time (A/B builds
// of the library): more stages mean fewer keys per tile where four CTAs would not fit
// (PagedShape::of), and with 4 the 512-byte rows of 16-bit head size 256 fit only three.
#ifdef ATTNKIT_CUDA_PAGED_STAGES
constexpr int kStages = ATTNKIT_CUDA_PAGED_STAGES;
#else
constexpr int kStages = 3;
#endif
static_assert(kStages >= 2 && kStages <= 4, "2 to 4 stages");

struct Fp8E4M3Tag {};
struct Fp8E5M2Tag {};

template <typename Kv>
inline constexpr int kKvBytes = sizeof(Kv) == 2 ? 2 : 1;

// Shared memory the kernel declares statically for `rows` packed rows: the warps'
// probabilities, the epilogue's per-warp max and sum, the rows' visible keys.
__host__ __device__ constexpr int static_smem_bytes(int rows) {
  return kWarps * 32 * rows * static_cast<int>(sizeof(float)) +
         2 * kWarps * rows * static_cast<int>(sizeof(float)) +
         rows * 2 * static_cast<int>(sizeof(int));
}

// The shapes of one warp's tiles, from the head size, the cache's element size, the packed
// rows R and the row groups G (the same on the host, which sizes the shared memory, and on
// the device).
//
// Dynamic shared memory of a CTA:
//   [0, q_bytes)                      q: [R][head_size] fp32, rows past the item's zero
//   [q_bytes, + kWarps * ring bytes)  warp w's ring: kStages stages of stage_bytes
//   a stage holding K: [keys][k_stride] 16-byte slots, slot c of key k's row at slot
//                      c ^ (k & k_swizzle) of line k (past row_slots: padding)
//   a stage holding V: [keys][row_slots] 16-byte slots, rows back to back
//   epilogue (after the key loop, over all of the above): [kWarps][R][head_size] fp32
struct PagedShape {
  int rows;         // R
  int row_groups;   // G
  int keys;         // keys per tile: 32 / G
  int chunks;       // 8-element chunks of a row (head_size / 8): P * V lanes per value row
  int row_slots;    // 16-byte slots of a cached row (the cp.async granularity)
  int k_stride;     // slots between staged K rows (see with_groups)
  int k_swizzle;    // 7 when K rows are XOR-swizzled in groups of 8 slots, else 0
  int stage_bytes;  // one stage: keys rows of k_stride slots (V rows need no more)
  int q_bytes;

  __host__ __device__ static constexpr PagedShape with_groups(int head_size, int kv_bytes,
                                                              int groups, int rows) {
    PagedShape s{};
    s.rows = rows;
    s.row_groups = groups;
    s.keys = 32 / groups;
    s.chunks = head_size / 8;
    s.row_slots = head_size * kv_bytes / 16;
    // The score reads: one LDS.128 phase (8 lanes) reads slot c of 8 consecutive keys'
    // rows, which must fall in the 8 different 16-byte bank groups of a 128-byte line.
    // Rows of a multiple of 8 slots are XOR-swizzled (slot c of key k at c ^ (k & 7)): no
    // padding, so that 32 keys of 128 bytes or 16 of 256 fit four CTAs per SM. Other rows
    // are made an odd number of slots long (odd is coprime with the 8 groups): one slot of
    // padding at most.
    const bool swizzled = s.row_slots % 8 == 0;
    s.k_stride = swizzled ? s.row_slots : (s.row_slots | 1);
    s.k_swizzle = swizzled ? 7 : 0;
    s.stage_bytes = s.keys * s.k_stride * 16;
    s.q_bytes = rows * head_size * static_cast<int>(sizeof(float));
    return s;
  }
  // The fewest row groups (most keys per tile, so the fewest repeated K conversions) whose
  // shared memory lets kCtasPerSm CTAs share an SM.
  // Eight rows start at two groups: a lane then scores at most 4 rows, as with four rows
  // (8 rows a lane spill under the 128-register bound).
  __host__ __device__ static constexpr PagedShape of(int head_size, int kv_bytes, int rows) {
    PagedShape s = with_groups(head_size, kv_bytes, 1, rows);
    if (rows <= 4 && s.cta_smem_bytes(head_size) <= kCtaSmemBudget) return s;
    s = with_groups(head_size, kv_bytes, 2, rows);
    if (s.cta_smem_bytes(head_size) <= kCtaSmemBudget) return s;
    return with_groups(head_size, kv_bytes, 4, rows);
  }
  __host__ __device__ constexpr int dynamic_smem_bytes(int head_size) const {
    const int loop = q_bytes + kWarps * kStages * stage_bytes;
    const int epilogue = kWarps * rows * head_size * static_cast<int>(sizeof(float));
    return loop > epilogue ? loop : epilogue;
  }
  __host__ __device__ constexpr int cta_smem_bytes(int head_size) const {
    return dynamic_smem_bytes(head_size) + static_smem_bytes(rows);
  }
};

// The most dynamic shared memory any head size, cache dtype and row count the kernels run
// asks for (their opt-in), and whether each of those fits kCtasPerSm CTAs per SM.
struct PagedSmemBound {
  int most_dynamic;
  bool all_fit;
};
constexpr PagedSmemBound paged_smem_bound() {
  PagedSmemBound bound{0, true};
  for (int kv_bytes = 1; kv_bytes <= 2; ++kv_bytes) {
    for (int head_size = 16; head_size <= kMaxHead; head_size += 16) {
      for (int rows = 4; rows <= 8; rows += 4) {
        if (rows == 8 && paged_rows_per_cta(head_size, kv_bytes, 8) != 8) continue;
        const PagedShape s = PagedShape::of(head_size, kv_bytes, rows);
        const int bytes = s.dynamic_smem_bytes(head_size);
        bound.most_dynamic = bytes > bound.most_dynamic ? bytes : bound.most_dynamic;
        bound.all_fit = bound.all_fit && s.cta_smem_bytes(head_size) <= kCtaSmemBudget;
      }
    }
  }
  return bound;
}
constexpr int max_dynamic_smem_bytes() { return paged_smem_bound().most_dynamic; }
// Up to 3 stages, every head size, cache dtype and row count fits four CTAs per SM.
static_assert(kStages > 3 || paged_smem_bound().all_fit,
              "every head size must fit kCtasPerSm CTAs per SM");

// Elements of a 16-byte slot: 8 for 16-bit types, 16 for fp8.
template <typename Kv>
inline constexpr int kSlotElems = 16 / kKvBytes<Kv>;

// Eight consecutive staged cache elements as floats (16 bytes for 16-bit types, 8 for fp8).
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

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The CTA's packed rows of Q as fp32 in shared memory (q: [kR][dim], rows past `rows`
// zero), read as broadcasts by the scoring lanes.
template <typename T, int kR>
__device__ __forceinline__ void load_q_rows(const PagedAttentionParams& p, const CudaWorkItem& item,
                                            int kv_head, int group, int dim, int rows, int tid,
                                            float* s_q) {
  for (int i = tid; i < kR * dim; i += blockDim.x) {
    const int r = i / dim, d = i % dim;
    float v = 0.0f;
    if (r < rows) {
      const int row = item.row_begin + r;
      const int token = item.q_start + row / group;
      const int head = kv_head * group + row % group;
      v = to_float(static_cast<const T*>(
          p.q)[static_cast<int64_t>(token) * p.q_token_stride + head * p.q_head_stride + d]);
    }
    s_q[i] = v;
  }
}

// Where a copying lane's key lives: its physical block and slot in the block (paged
// caches), or block -1 for a key past kv_end (not copied). Contiguous caches: block 0 and
// the key's row in the request's range.
struct KeySlot {
  int block;
  int in_block;
};
// `block_div` divides by p.block_size.
__device__ __forceinline__ KeySlot locate_key(const PagedAttentionParams& p,
                                              const FastDivmod& block_div, const CudaWorkItem& item,
                                              int key) {
  if (key >= item.kv_end) return {-1, 0};
  if (p.block_table == nullptr) return {0, p.kv_start_loc[item.seq] + key};
  const int block_index = block_div.quotient(key);
  return {p.block_table[static_cast<int64_t>(item.seq) * p.block_table_stride + block_index],
          block_div.remainder(key, block_index)};
}

// Element offsets of a located key's K and V rows of this KV head (-1: not copied).
struct RowOffsets {
  int64_t k;
  int64_t v;
};
__device__ __forceinline__ RowOffsets row_offsets(const PagedAttentionParams& p, KeySlot at,
                                                  int kv_head) {
  if (at.block < 0) return {-1, -1};
  const int64_t k = static_cast<int64_t>(at.block) * p.k_block_stride +
                    static_cast<int64_t>(at.in_block) * p.k_token_stride +
                    static_cast<int64_t>(kv_head) * p.k_head_stride;
  const int64_t v = static_cast<int64_t>(at.block) * p.v_block_stride +
                    static_cast<int64_t>(at.in_block) * p.v_token_stride +
                    static_cast<int64_t>(kv_head) * p.v_head_stride;
  return {k, v};
}

// Copies the lane's share of one cached row (element offset `row`, -1: none) into line
// `line` of a stage: slots part, part + G, ... (the G lanes of a key copy neighbouring
// 16-byte slots, so one copy instruction reads whole 32-byte sectors for G >= 2), slot c
// landing at slot c ^ swizzle of the line.
template <typename Kv>
__device__ __forceinline__ void copy_row(const void* cache, int64_t row, uint32_t stage,
                                         int line_bytes, int line, int swizzle, int part,
                                         int groups, int row_slots) {
  if (row < 0) return;
  const unsigned char* src = static_cast<const unsigned char*>(cache) + row * kKvBytes<Kv>;
  const uint32_t dst = stage + line * line_bytes;
#pragma unroll 4
  for (int c = part; c < row_slots; c += groups) {
    cp_async_16(dst + ((c ^ swizzle) << 4), src + c * 16, 16);
  }
}

// The raw scores x[i] = q_(first row + i) . k of the lane's key, whose staged row is line
// k_row (slot c at c ^ swizzle), the query rows as fp32 broadcasts from s_q. Rows of keys past
// kv_end hold stale bytes: their scores are masked by the softmax, never used.
template <typename Kv, int kRowsPerLane>
__device__ __forceinline__ void compute_qk(float (&x)[kRowsPerLane], const unsigned char* k_row,
                                           int swizzle, const float* q_rows, int dim,
                                           int row_slots) {
  constexpr int kElems = kSlotElems<Kv>;
#pragma unroll
  for (int i = 0; i < kRowsPerLane; ++i) x[i] = 0.0f;
#pragma unroll 2
  for (int c = 0; c < row_slots; ++c) {
    const uint4 raw = *reinterpret_cast<const uint4*>(k_row + ((c ^ swizzle) << 4));
    const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
    // Four elements at a time (two words of a 16-bit cache, one of fp8), each converted
    // once and used by every row: few floats live at once (8 rows a lane is tight).
#pragma unroll
    for (int e = 0; e < kElems; e += 4) {
      float kf[4];
      if constexpr (kKvBytes<Kv> == 2) {
        const float2 lo = unpack2<Kv>(words[e / 2]);
        const float2 hi = unpack2<Kv>(words[e / 2 + 1]);
        kf[0] = lo.x, kf[1] = lo.y, kf[2] = hi.x, kf[3] = hi.y;
      } else {
        constexpr __nv_fp8_interpretation_t kind =
            std::is_same_v<Kv, Fp8E5M2Tag> ? __NV_E5M2 : __NV_E4M3;
        const uint32_t word = words[e / 4];
        const float2 lo = __half22float2(
            __half2(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(word), kind)));
        const float2 hi = __half22float2(__half2(
            __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(word >> 16), kind)));
        kf[0] = lo.x, kf[1] = lo.y, kf[2] = hi.x, kf[3] = hi.y;
      }
#pragma unroll
      for (int i = 0; i < kRowsPerLane; ++i) {
        const float4 qv = *reinterpret_cast<const float4*>(q_rows + i * dim + c * kElems + e);
        x[i] = fmaf(qv.x, kf[0], x[i]);
        x[i] = fmaf(qv.y, kf[1], x[i]);
        x[i] = fmaf(qv.z, kf[2], x[i]);
        x[i] = fmaf(qv.w, kf[3], x[i]);
      }
    }
  }
}

// Online softmax over the warp's tile: the lane's key `key` against its rows (row group
// `row_group`; window[i] the visible keys of its row i, empty for padding rows). Each row's
// tile max comes from the keys' lanes by a shuffle tree within the row group, then to every
// lane by one shuffle per row; the lanes move m to it and rescale l and acc (every lane
// owns output columns of all kR rows) and the lane's probabilities go to s_p_key (the kR
// rows' p of its key) for the P * V passes. l[r] sums only the lane's own keys.
template <int kGroups, int kR>
__device__ __forceinline__ void online_softmax_update(float (&m)[kR], float (&l)[kR],
                                                      float (&acc)[kR][8],
                                                      const float (&x)[kR / kGroups],
                                                      const PagedAttentionParams& p,
                                                      const KeyWindow* window, int key,
                                                      int row_group, float* s_p_key) {
  constexpr int kRowsPerLane = kR / kGroups;
  constexpr int kKeys = 32 / kGroups;
  float s[kRowsPerLane], tile_max[kRowsPerLane];
#pragma unroll
  for (int i = 0; i < kRowsPerLane; ++i) {
    const KeyWindow w = window[i];
    const bool visible = key >= w.lo && key <= w.hi;
    s[i] = visible ? score_log2(p, x[i] * p.k_scale) : -INFINITY;
    tile_max[i] = s[i];
#pragma unroll
    for (int o = kKeys / 2; o > 0; o >>= 1) {
      tile_max[i] = fmaxf(tile_max[i], __shfl_xor_sync(0xffffffffu, tile_max[i], o));
    }
  }
  // Every row's tile max in every lane (warp-uniform from here on).
  float row_max[kR];
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    row_max[r] = kGroups == 1 ? tile_max[r % kRowsPerLane]
                              : __shfl_sync(0xffffffffu, tile_max[r % kRowsPerLane],
                                            (r / kRowsPerLane) * kKeys);
  }
  bool grew = false;
#pragma unroll
  for (int r = 0; r < kR; ++r) grew |= row_max[r] > m[r];
  if (grew) {  // warp-uniform: the max stays put on most tiles after the first few
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      const float m_new = fmaxf(m[r], row_max[r]);
      const float alpha = safe_exp2(m[r], m_new);
      m[r] = m_new;
      l[r] *= alpha;
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[r][e] *= alpha;
    }
  }
#pragma unroll
  for (int i = 0; i < kRowsPerLane; ++i) {
    // m of the lane's row i (compile-time indices, selected by the row group).
    float mine = m[i];
#pragma unroll
    for (int g = 1; g < kGroups; ++g) mine = row_group == g ? m[g * kRowsPerLane + i] : mine;
    const float pr = safe_exp2(s[i], mine);
#pragma unroll
    for (int g = 0; g < kGroups; ++g) {
      if (row_group == g) l[g * kRowsPerLane + i] += pr;
    }
    s_p_key[row_group * kRowsPerLane + i] = pr;
  }
}

// acc += P * V over the stage's first `valid` keys: pass k covers keys k * keys_per_pass
// .. + keys_per_pass - 1; the lane takes chunk my_chunk of its key's value row (rows of
// row_bytes back to back) and the key's probabilities from s_p ([key][kR]). Keys past
// kv_end are skipped: their staged rows are stale bytes (maybe NaN), and 0 * NaN is not 0.
template <typename Kv, int kR>
__device__ __forceinline__ void accumulate_pv(float (&acc)[kR][8], const unsigned char* v_stage,
                                              int row_bytes, const float* s_p, int valid,
                                              int keys_per_pass, int my_key_slot, int my_chunk) {
  if (my_key_slot >= keys_per_pass) return;
  const unsigned char* v = v_stage + my_chunk * 8 * kKvBytes<Kv>;
#pragma unroll 1
  for (int key = my_key_slot; key < valid; key += keys_per_pass) {
    float pr[kR];
#pragma unroll
    for (int q = 0; q < kR / 4; ++q) {
      const float4 pk = reinterpret_cast<const float4*>(s_p + key * kR)[q];
      pr[4 * q] = pk.x, pr[4 * q + 1] = pk.y, pr[4 * q + 2] = pk.z, pr[4 * q + 3] = pk.w;
    }
    float vf[8];
    smem8<Kv>(v + key * row_bytes, vf);
#pragma unroll
    for (int r = 0; r < kR; ++r) {
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[r][e] = fmaf(pr[r], vf[e], acc[r][e]);
    }
  }
}

// Epilogue, first half: merges the lanes of the warp that hold the same chunk (different
// key slots) into s_o[warp], and publishes the warp's max and (lane-summed) sum per row.
template <int kR>
__device__ __forceinline__ void store_warp_state(float* s_o_warp, float (&s_m)[kWarps][kR],
                                                 float (&s_l)[kWarps][kR],
                                                 const float (&acc)[kR][8], const float (&m)[kR],
                                                 const float (&l)[kR], int dim, int keys_per_pass,
                                                 int my_key_slot, int my_chunk, int lane,
                                                 int warp) {
  for (int i = lane; i < kR * dim; i += 32) s_o_warp[i] = 0.0f;
  __syncwarp();
  for (int slot = 0; slot < keys_per_pass; ++slot) {
    if (my_key_slot == slot) {
#pragma unroll
      for (int r = 0; r < kR; ++r) {
#pragma unroll
        for (int e = 0; e < 8; ++e) s_o_warp[r * dim + my_chunk * 8 + e] += acc[r][e];
      }
    }
    __syncwarp();
  }
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    const float sum = warp_sum(l[r]);
    if (lane == 0) {
      s_m[warp][r] = m[r];
      s_l[warp][r] = sum;
    }
  }
}

// Epilogue, second half: merges the kWarps states of each row and writes the output (the
// sink joins the denominator), or the split-KV partial row and its log2-sum-exp.
template <typename T, int kR>
__device__ __forceinline__ void write_output(const PagedAttentionParams& p,
                                             const CudaWorkItem& item, int kv_head, int group,
                                             int dim, int rows, int tid, const float* s_o,
                                             const float (&s_m)[kWarps][kR],
                                             const float (&s_l)[kWarps][kR], float* partial_o,
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
      o += wt * s_o[(w * kR + r) * dim + d];
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

}  // namespace attnkit::cuda::paged
