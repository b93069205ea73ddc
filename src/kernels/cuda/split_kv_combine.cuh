#pragma once
// Split-KV combine (CUDA_PAGED): merges the per-split partial results of a token
// (DevicePlan layout) into the final output, adding the sink to the denominator. One CTA
// per (token, head).
//   out = sum_k w_k o_k / (sum_k w_k + exp2(sink - M)),  w_k = l_k exp2(m_k - M)
// where each partial o_k is already divided by its own l_k and lse_k = m_k + log2(l_k).

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/device_plan.h"
#include "kernels/cuda/kernel_launch.cuh"

namespace attnkit::cuda {

// Each CTA first stages the splits' log-sum-exps in shared memory (all threads load at
// once), so that the loops over splits hold no chain of dependent L2 reads. Plans with
// more splits than kMaxStagedSplits (the planner's default cap) read the rest directly.
inline constexpr int kMaxStagedSplits = 64;
static_assert(PlanShape{}.max_splits <= kMaxStagedSplits, "default plans stage every split");

template <typename T>
__global__ void split_kv_combine_kernel(PagedAttentionParams p, const CudaCombineItem* items,
                                        const float* partial_o, const float* partial_lse) {
  __shared__ float s_lse[kMaxStagedSplits];
  const CudaCombineItem item = items[blockIdx.x];
  const int head = blockIdx.y;
  const int num_heads = p.num_heads;
  const int ns = item.num_splits;
  auto row_of = [&](int k) { return static_cast<int64_t>(item.slot_begin + k) * num_heads + head; };
  for (int k = threadIdx.x; k < ns && k < kMaxStagedSplits; k += blockDim.x) {
    s_lse[k] = partial_lse[row_of(k)];
  }
  __syncthreads();
  auto lse = [&](int k) { return k < kMaxStagedSplits ? s_lse[k] : partial_lse[row_of(k)]; };
  float big = -INFINITY;
  for (int k = 0; k < ns; ++k) big = fmaxf(big, lse(k));
  const float sink = p.sinks != nullptr ? p.sinks[head] * kLog2e : -INFINITY;
  const float ref = fmaxf(big, sink);
  float denom = safe_exp2(sink, ref);
  for (int k = 0; k < ns; ++k) denom += safe_exp2(lse(k), ref);
  const float inv = denom > 0.0f ? 1.0f / denom : 0.0f;
  T* out = static_cast<T*>(p.out) + item.token * p.o_token_stride + head * p.o_head_stride;
  for (int d = threadIdx.x; d < p.head_size_v; d += blockDim.x) {
    float acc = 0.0f;
#pragma unroll 4
    for (int k = 0; k < ns; ++k) {
      const float w = safe_exp2(lse(k), ref);
      if (w != 0.0f) acc += w * partial_o[row_of(k) * p.head_size_v + d];
    }
    out[d] = from_float<T>(acc * inv);
  }
}

template <typename T>
void launch_split_kv_combine(const PagedAttentionParams& p, const DevicePlan& plan) {
  static const bool loaded = load_kernel(split_kv_combine_kernel<T>);
  (void)loaded;
  if (plan.num_combine == 0) return;  // and DevicePlan::load_only: loaded above
  split_kv_combine_kernel<T>
      <<<dim3(plan.num_combine, p.num_heads), 128, 0, static_cast<cudaStream_t>(plan.stream)>>>(
          p, plan.combine_items, plan.partial_o, plan.partial_lse);
  ATTNKIT_CUDA_CHECK_LAUNCH(split_kv_combine_kernel);
}

}  // namespace attnkit::cuda
