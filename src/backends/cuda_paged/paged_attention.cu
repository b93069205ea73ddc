// CUDA_PAGED: paged attention on CUDA cores, for any head size that is a multiple of 16 up
// to 256 and K/V stored as fp16, bf16 or fp8 (e4m3/e5m2, dequantised with k/v_scale).
//
// One CTA (4 warps) runs one CudaWorkItem of up to kRows = 4 packed rows for one KV head.
// The warps split the item's key range: warp w takes 32-key tiles w, w+4, ... and keeps
// its own online-softmax state; the epilogue merges the four states in shared memory.
// Inside a tile, lane l scores key l against the 4 rows (q in shared memory as fp32,
// read as broadcasts), then for P*V each lane owns one 8-element chunk of the value row
// of key (pass * keys_per_pass + lane / chunks), taking p and the key's row offset from the
// scoring lane by shuffle. Each lane issues its loads kBatch at a time before using them.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <string>

#include "backends/cuda_paged/paged_kernels.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/split_kv_combine.cuh"

namespace attnkit::cuda {
namespace {

constexpr int kRows = 4;  // packed rows per CTA
constexpr int kWarps = 4;
constexpr int kTile = 32;  // keys per warp tile (one per lane)
constexpr int kMaxHead = 256;
// Loads of one lane in flight together (key chunks, value rows). 2 keeps the kernel at 127
// registers, 4 CTAs per SM; 4 needs 167 (3 CTAs per SM) or spills under a 128 cap, and
// both were slower on the H200 (bench/results/cuda.md, run 33).
constexpr int kBatch = 2;

struct Fp8E4M3Tag {};
struct Fp8E5M2Tag {};

// Loads 8 consecutive cache elements as floats (16 bytes for 16-bit types, 8 for fp8).
template <typename Kv>
__device__ __forceinline__ void load8(const void* base, int64_t offset, float (&out)[8]);
template <>
__device__ __forceinline__ void load8<__half>(const void* base, int64_t offset, float (&out)[8]) {
  const uint4 raw = *reinterpret_cast<const uint4*>(static_cast<const __half*>(base) + offset);
  const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __half22float2(h[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}
template <>
__device__ __forceinline__ void load8<__nv_bfloat16>(const void* base, int64_t offset,
                                                     float (&out)[8]) {
  const uint4 raw =
      *reinterpret_cast<const uint4*>(static_cast<const __nv_bfloat16*>(base) + offset);
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}
template <__nv_fp8_interpretation_t kind>
__device__ __forceinline__ void load8_fp8(const void* base, int64_t offset, float (&out)[8]) {
  const uint2 raw = *reinterpret_cast<const uint2*>(static_cast<const uint8_t*>(base) + offset);
  const __nv_fp8x2_storage_t* pairs = reinterpret_cast<const __nv_fp8x2_storage_t*>(&raw);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const __half2 h = __half2(__nv_cvt_fp8x2_to_halfraw2(pairs[i], kind));
    const float2 f = __half22float2(h);
    out[2 * i] = f.x;
    out[2 * i + 1] = f.y;
  }
}
template <>
__device__ __forceinline__ void load8<Fp8E4M3Tag>(const void* base, int64_t offset,
                                                  float (&out)[8]) {
  load8_fp8<__NV_E4M3>(base, offset, out);
}
template <>
__device__ __forceinline__ void load8<Fp8E5M2Tag>(const void* base, int64_t offset,
                                                  float (&out)[8]) {
  load8_fp8<__NV_E5M2>(base, offset, out);
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

// The steps of paged_attention_kernel, inlined into it: the per-lane state is passed by
// reference to arrays, every size is a compile-time constant.

// The CTA's packed rows of Q as fp32 in shared memory (rows past `rows` zero-filled), read
// as broadcasts by the scoring lanes.
template <typename T>
__device__ __forceinline__ void load_q_rows(const PagedAttentionParams& p, const CudaWorkItem& item,
                                            int kv_head, int group, int dim, int rows, int tid,
                                            float (&s_q)[kRows][kMaxHead]) {
  for (int i = tid; i < kRows * dim; i += blockDim.x) {
    const int r = i / dim, d = i % dim;
    float v = 0.0f;
    if (r < rows) {
      const int row = item.row_begin + r;
      const int token = item.q_start + row / group;
      const int head = kv_head * group + row % group;
      v = to_float(
          static_cast<const T*>(p.q)[token * p.q_token_stride + head * p.q_head_stride + d]);
    }
    s_q[r][d] = v;
  }
}

// The scores of this lane's key (at element offset k_row) against the kRows rows: x[r] =
// q_r . k (raw dot products; 0 past kv_end). Loads go out kBatch at a time into kf before
// any of them is used: one lane's loads would otherwise wait for each other (a DRAM round
// trip per 8 elements).
template <typename Kv>
__device__ __forceinline__ void compute_qk(float (&x)[kRows], float (&kf)[kBatch][8],
                                           const PagedAttentionParams& p,
                                           const float (&s_q)[kRows][kMaxHead], int64_t k_row,
                                           int key, int kv_end, int chunks) {
#pragma unroll
  for (int r = 0; r < kRows; ++r) x[r] = 0.0f;
  if (key < kv_end) {
    for (int c0 = 0; c0 < chunks; c0 += kBatch) {
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        if (c0 + j < chunks) load8<Kv>(p.k_cache, k_row + (c0 + j) * 8, kf[j]);
      }
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        if (c0 + j >= chunks) continue;
        const int c = c0 + j;
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          const float4 q0 = *reinterpret_cast<const float4*>(&s_q[r][c * 8]);
          const float4 q1 = *reinterpret_cast<const float4*>(&s_q[r][c * 8 + 4]);
          x[r] += q0.x * kf[j][0] + q0.y * kf[j][1] + q0.z * kf[j][2] + q0.w * kf[j][3] +
                  q1.x * kf[j][4] + q1.y * kf[j][5] + q1.z * kf[j][6] + q1.w * kf[j][7];
        }
      }
    }
  }
}

// Online softmax over the warp's tile: masks the scores (kv_end, padding rows, mask.h's
// rule), moves each row's max m to the tile's, rescales the lane's sum l and accumulators
// acc to it, and leaves the key's probabilities in pr.
__device__ __forceinline__ void online_softmax_update(float (&pr)[kRows], float (&m)[kRows],
                                                      float (&l)[kRows], float (&acc)[kRows][8],
                                                      const float (&x)[kRows],
                                                      const PagedAttentionParams& p,
                                                      const int (&row_pos)[kRows], int key,
                                                      int kv_end, int rows) {
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    float s = score_log2(p, x[r] * p.k_scale);
    if (key >= kv_end || r >= rows || !key_visible(p, row_pos[r], key)) s = -INFINITY;
    const float m_new = fmaxf(m[r], warp_max(s));
    const float alpha = safe_exp2(m[r], m_new);
    m[r] = m_new;
    pr[r] = safe_exp2(s, m_new);
    l[r] = l[r] * alpha + pr[r];  // per-lane partial sum, reduced at the end
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[r][e] *= alpha;
  }
}

// acc += P * V over the tile at kb: pass k covers keys k*keys_per_pass .. +keys_per_pass-1
// of the tile; kBatch passes' value loads (into vf) go out together. Each lane takes p (into
// pk) and the key's value row offset from the key's scoring lane by shuffle.
template <typename Kv>
__device__ __forceinline__ void accumulate_pv(float (&acc)[kRows][8], float (&vf)[kBatch][8],
                                              float (&pk)[kBatch][kRows], bool (&live)[kBatch],
                                              const float (&pr)[kRows],
                                              const PagedAttentionParams& p, int64_t v_row, int kb,
                                              int kv_end, int keys_per_pass, int my_key_slot,
                                              int my_chunk) {
  for (int base = 0; base < kTile; base += kBatch * keys_per_pass) {
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      const int local = base + j * keys_per_pass + my_key_slot;
      const int64_t row = __shfl_sync(0xffffffffu, v_row, local & 31);
#pragma unroll
      for (int r = 0; r < kRows; ++r) pk[j][r] = __shfl_sync(0xffffffffu, pr[r], local & 31);
      live[j] = my_key_slot < keys_per_pass && local < kTile && kb + local < kv_end;
      if (live[j]) load8<Kv>(p.v_cache, row + my_chunk * 8, vf[j]);
    }
#pragma unroll
    for (int j = 0; j < kBatch; ++j) {
      if (!live[j]) continue;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
#pragma unroll
        for (int e = 0; e < 8; ++e) acc[r][e] += pk[j][r] * vf[j][e];
      }
    }
  }
}

// Epilogue, first half: merges the lanes of the warp that hold the same chunk (different
// key slots) into s_o[warp], and publishes the warp's max and (lane-summed) sum per row.
__device__ __forceinline__ void store_warp_state(
    float (&s_o)[kWarps][kRows][kMaxHead], float (&s_m)[kWarps][kRows], float (&s_l)[kWarps][kRows],
    const float (&acc)[kRows][8], const float (&m)[kRows], const float (&l)[kRows], int dim,
    int keys_per_pass, int my_key_slot, int my_chunk, int lane, int warp) {
  for (int i = lane; i < kRows * dim; i += 32) s_o[warp][i / dim][i % dim] = 0.0f;
  __syncwarp();
  for (int slot = 0; slot < keys_per_pass; ++slot) {
    if (my_key_slot == slot) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
#pragma unroll
        for (int e = 0; e < 8; ++e) s_o[warp][r][my_chunk * 8 + e] += acc[r][e];
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
                                             int dim, int rows, int tid,
                                             const float (&s_o)[kWarps][kRows][kMaxHead],
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
      o += wt * s_o[w][r][d];
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
  __shared__ __align__(16) float s_q[kRows][kMaxHead];
  __shared__ __align__(16) float s_o[kWarps][kRows][kMaxHead];
  __shared__ float s_m[kWarps][kRows], s_l[kWarps][kRows];

  const CudaWorkItem item = items[blockIdx.x];
  const int kv_head = blockIdx.y;
  const int group = p.num_heads / p.num_kv_heads;
  const int dim = p.head_size;
  const int chunks = dim / 8;             // <= 32
  const int keys_per_pass = 32 / chunks;  // value rows read per pass of the warp
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int rows = min(kRows, item.row_end - item.row_begin);

  load_q_rows<T>(p, item, kv_head, group, dim, rows, tid, s_q);
  __syncthreads();

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
  const int my_chunk = lane % chunks;
  const int my_key_slot = lane / chunks;  // < keys_per_pass for active value lanes

  for (int kb = item.kv_begin + warp * kTile; kb < item.kv_end; kb += kWarps * kTile) {
    // Lane l <-> key kb + l: its K and V row offsets, looked up once per tile (the V
    // offset's block-table read is the K one's again, an L1 hit); the value passes
    // take them from the key's lane by shuffle instead of a lookup per pass.
    const int key = kb + lane;
    int64_t k_row = 0, v_row = 0;
    if (key < item.kv_end) {
      k_row = kv_token_offset(p, item.seq, key, p.k_block_stride, p.k_token_stride) +
              kv_head * p.k_head_stride;
      v_row = kv_token_offset(p, item.seq, key, p.v_block_stride, p.v_token_stride) +
              kv_head * p.v_head_stride;
    }
    // The load batches' arrays (kf, vf, pk, live) are declared here, not in the steps: as
    // the steps' locals they change the order in which the compiler promotes the running
    // state to registers, and with it the register allocation (sm_90: 122-126 registers
    // instead of 127, different SASS).
    float x[kRows], kf[kBatch][8];
    compute_qk<Kv>(x, kf, p, s_q, k_row, key, item.kv_end, chunks);
    float pr[kRows];
    online_softmax_update(pr, m, l, acc, x, p, row_pos, key, item.kv_end, rows);
    float vf[kBatch][8], pk[kBatch][kRows];
    bool live[kBatch];
    accumulate_pv<Kv>(acc, vf, pk, live, pr, p, v_row, kb, item.kv_end, keys_per_pass, my_key_slot,
                      my_chunk);
  }

  store_warp_state(s_o, s_m, s_l, acc, m, l, dim, keys_per_pass, my_key_slot, my_chunk, lane, warp);
  __syncthreads();
  write_output<T>(p, item, kv_head, group, dim, rows, tid, s_o, s_m, s_l, partial_o, partial_lse);
}

template <typename T, typename Kv>
void launch_items(const PagedAttentionParams& p, const CudaWorkItem* items, int count,
                  const DevicePlan& plan) {
  if (count == 0) return;
  paged_attention_kernel<T, Kv>
      <<<dim3(count, p.num_kv_heads), kWarps * 32, 0, static_cast<cudaStream_t>(plan.stream)>>>(
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

KernelGeometry paged_geometry(int /*head_size*/) { return {kRows, kRows, kTile, 4}; }

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
