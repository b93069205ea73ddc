#pragma once
// Split-KV combine (CUDA_PAGED): merges the per-split partial results of a token
// (DevicePlan layout) into the final output, adding the sink to the denominator. One CTA
// per (token, head).
//   out = sum_k w_k o_k / (sum_k w_k + exp2(sink - M)),  w_k = l_k exp2(m_k - M)
// where each partial o_k is already divided by its own l_k and lse_k = m_k + log2(l_k).

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/device_common.cuh"

namespace attnkit::cuda {

// The split count is at most PlanShape::max_splits; each CTA stages the splits' weights
// in shared memory first (all threads load at once), so that the loop over splits holds
// no chain of dependent L2 reads and several partial loads are in flight.
inline constexpr int kMaxCombineSplits = 64;
static_assert(PlanShape{}.max_splits <= kMaxCombineSplits, "combine weights in shared memory");

template <typename T>
__global__ void split_kv_combine_kernel(PagedAttentionParams p, const CudaCombineItem* items,
                                        const float* partial_o, const float* partial_lse) {
  __shared__ float s_w[kMaxCombineSplits];
  const CudaCombineItem item = items[blockIdx.x];
  const int head = blockIdx.y;
  const int num_heads = p.num_heads;
  const int ns = item.num_splits;
  for (int k = threadIdx.x; k < ns; k += blockDim.x) {
    s_w[k] = partial_lse[static_cast<int64_t>(item.slot_begin + k) * num_heads + head];
  }
  __syncthreads();
  float big = -INFINITY;
  for (int k = 0; k < ns; ++k) big = fmaxf(big, s_w[k]);
  const float sink = p.sinks != nullptr ? p.sinks[head] * kLog2e : -INFINITY;
  const float ref = fmaxf(big, sink);
  float denom = safe_exp2(sink, ref);
  for (int k = 0; k < ns; ++k) denom += safe_exp2(s_w[k], ref);
  const float inv = denom > 0.0f ? 1.0f / denom : 0.0f;
  T* out = static_cast<T*>(p.out) + item.token * p.o_token_stride + head * p.o_head_stride;
  for (int d = threadIdx.x; d < p.head_size_v; d += blockDim.x) {
    float acc = 0.0f;
    // Every split wrote its partial row (zeros where it saw no key): no guard needed.
#pragma unroll 4
    for (int k = 0; k < ns; ++k) {
      const int64_t row = static_cast<int64_t>(item.slot_begin + k) * num_heads + head;
      acc += safe_exp2(s_w[k], ref) * partial_o[row * p.head_size_v + d];
    }
    out[d] = from_float<T>(acc * inv);
  }
}

template <typename T>
void launch_split_kv_combine(const PagedAttentionParams& p, const DevicePlan& plan) {
  if (plan.num_combine == 0) return;
  split_kv_combine_kernel<T><<<dim3(plan.num_combine, p.num_heads), 128>>>(
      p, plan.combine_items, plan.partial_o, plan.partial_lse);
  ATTNKIT_CUDA_CHECK_LAUNCH(split_kv_combine_kernel);
}

}  // namespace attnkit::cuda
