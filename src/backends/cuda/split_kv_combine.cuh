#pragma once
// Split-KV combine: merges the per-split partial results of a token (DevicePlan layout)
// into the final output, adding the sink to the denominator. One CTA per (token, head).
//   out = sum_k w_k o_k / (sum_k w_k + exp2(sink - M)),  w_k = l_k exp2(m_k - M)
// where each partial o_k is already divided by its own l_k and lse_k = m_k + log2(l_k).

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/device_common.cuh"

namespace attnkit::cuda {

template <typename T>
__global__ void split_kv_combine_kernel(PagedAttentionParams p, const CudaCombineItem* items,
                                        const float* partial_o, const float* partial_lse) {
  const CudaCombineItem item = items[blockIdx.x];
  const int head = blockIdx.y;
  const int num_heads = p.num_heads;
  float big = -INFINITY;
  for (int k = 0; k < item.num_splits; ++k) {
    big = fmaxf(big, partial_lse[(item.slot_begin + k) * num_heads + head]);
  }
  const float sink = p.sinks != nullptr ? p.sinks[head] * kLog2e : -INFINITY;
  const float ref = fmaxf(big, sink);
  float denom = safe_exp2(sink, ref);
  for (int k = 0; k < item.num_splits; ++k) {
    denom += safe_exp2(partial_lse[(item.slot_begin + k) * num_heads + head], ref);
  }
  T* out = static_cast<T*>(p.out) + item.token * p.o_token_stride + head * p.o_head_stride;
  for (int d = threadIdx.x; d < p.head_size_v; d += blockDim.x) {
    float acc = 0.0f;
    for (int k = 0; k < item.num_splits; ++k) {
      const int64_t row = static_cast<int64_t>(item.slot_begin + k) * num_heads + head;
      const float w = safe_exp2(partial_lse[row], ref);
      if (w != 0.0f) acc += w * partial_o[row * p.head_size_v + d];
    }
    out[d] = from_float<T>(denom > 0.0f ? acc / denom : 0.0f);
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
