#pragma once
// CUDA_FLASH's in-kernel split-KV merge (see split_kv_merge_if_last): the last CTA of a
// split group merges the group's partial results (DevicePlan layout, cuda_kernels.h), so
// no combine launch follows the attention launch.

#include <cstdint>

#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/cuda_plan.h"
#include "backends/cuda/device_common.cuh"

namespace attnkit::cuda {

// The few PagedAttentionParams fields the merge reads, passed by value: a reference to
// the kernel's parameter block would make the compiler copy all of it to local memory.
struct SplitMergeArgs {
  void* out;
  const float* sinks;
  int64_t o_token_stride, o_head_stride;
  int num_heads, num_kv_heads;
};

// Split-KV: the CTA that finishes the last split of its (split group, KV head) merges
// all of them, so no combine launch follows. Classic last-block pattern: every thread
// fences its partial writes, one atomic per CTA counts, the last CTA fences again and
// reads the partials past L1 (__ldcg). It resets the counter for the next forward.
// The merge itself is three parallel passes over shared memory (lse of every (row,
// split), then per-row weights, then 8 output elements per thread with the partial loads
// of several splits in flight), not one chain of dependent L2 reads per split.
//   out = sum_k w_k o_k / (sum_k w_k + exp2(sink - M)),  w_k = exp2(lse_k - M)
// Not inlined, and re-reading the work item, so that none of this is live (in registers)
// during the main loop of the kernel.
// smem is the kernel's dynamic shared memory, free after its epilogue: 16 bytes for the
// last-CTA flag, then the weights [rows][num_splits] fp32. C::kMergeThreads threads from
// C::kMergeThreadBase on run it, synchronised by C::merge_sync().
template <typename T, typename C>
__device__ __noinline__ void split_kv_merge_if_last(SplitMergeArgs p, const CudaWorkItem* item_ptr,
                                                    int kv_head, const float* partial_o,
                                                    const float* partial_lse,
                                                    unsigned* split_counters, unsigned char* smem) {
  constexpr int D = C::D, kRows = C::kRows, kChunks = C::kChunks, kThreads = C::kMergeThreads;
  static_assert(16 + 4 * kRows * PlanShape{}.max_splits <= C::kSmemBytes,
                "the merge keeps one weight per (row, split) in shared memory");
  const CudaWorkItem item = *item_ptr;
  const int tid = static_cast<int>(threadIdx.x) - C::kMergeThreadBase;
  const int group = p.num_heads / p.num_kv_heads;
  __threadfence();
  C::merge_sync();
  int* s_last = reinterpret_cast<int*>(smem);
  if (tid == 0) {
    unsigned* counter = split_counters + item.split_group * p.num_kv_heads + kv_head;
    const unsigned done = atomicAdd(counter, 1u);
    const bool last = done + 1 == static_cast<unsigned>(item.num_splits);
    if (last) *counter = 0u;
    *s_last = last ? 1 : 0;
  }
  C::merge_sync();
  if (*s_last == 0) return;
  __threadfence();

  const int ns = item.num_splits;
  const int rows = min(item.row_end - item.row_begin, kRows);
  float* s_w = reinterpret_cast<float*>(smem + 16);  // [rows][ns]
  // Slot row of (local row r, split k) in the partial arrays.
  auto slot_row = [&](int r, int k) {
    const int row = item.row_begin + r;
    return static_cast<int64_t>(item.partial_base + (row / group) * ns + k) * p.num_heads +
           kv_head * group + row % group;
  };
  for (int i = tid; i < rows * ns; i += kThreads) {
    s_w[i] = __ldcg(partial_lse + slot_row(i / ns, i % ns));
  }
  C::merge_sync();
  for (int r = tid; r < rows; r += kThreads) {
    float* w = s_w + r * ns;
    float big = -INFINITY;
    for (int k = 0; k < ns; ++k) big = fmaxf(big, w[k]);
    const int head = kv_head * group + (item.row_begin + r) % group;
    const float sink = p.sinks != nullptr ? p.sinks[head] * kLog2e : -INFINITY;
    const float ref = fmaxf(big, sink);
    float denom = safe_exp2(sink, ref);
    for (int k = 0; k < ns; ++k) {
      w[k] = safe_exp2(w[k], ref);
      denom += w[k];
    }
    const float inv = denom > 0.0f ? 1.0f / denom : 0.0f;
    for (int k = 0; k < ns; ++k) w[k] *= inv;
  }
  C::merge_sync();
  for (int i = tid; i < rows * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    // Every split wrote all its rows (zeros where it saw no key), so the loads need no
    // guard and several can be in flight.
#pragma unroll 4
    for (int k = 0; k < ns; ++k) {
      const float w = s_w[r * ns + k];
      const float4* src = reinterpret_cast<const float4*>(partial_o + slot_row(r, k) * D + c * 8);
      const float4 a = __ldcg(src), b = __ldcg(src + 1);
      acc[0] += w * a.x;
      acc[1] += w * a.y;
      acc[2] += w * a.z;
      acc[3] += w * a.w;
      acc[4] += w * b.x;
      acc[5] += w * b.y;
      acc[6] += w * b.z;
      acc[7] += w * b.w;
    }
    const int row = item.row_begin + r;
    uint4 packed;
    packed.x = pack2<T>(acc[0], acc[1]);
    packed.y = pack2<T>(acc[2], acc[3]);
    packed.z = pack2<T>(acc[4], acc[5]);
    packed.w = pack2<T>(acc[6], acc[7]);
    T* out = static_cast<T*>(p.out) + (item.q_start + row / group) * p.o_token_stride +
             (kv_head * group + row % group) * p.o_head_stride + c * 8;
    *reinterpret_cast<uint4*>(out) = packed;
  }
}

}  // namespace attnkit::cuda
