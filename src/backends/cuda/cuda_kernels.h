#pragma once
// Host entry points of the CUDA kernels (defined in the .cu files, compiled only when the
// build has CUDA). No CUDA types cross this header, so the host-side backend code includes
// it in every build and calls it only under ATTNKIT_HAS_CUDA.
//
// All pointers (params, plan arrays, workspace) are device pointers. Launches go to the
// legacy default stream; every CUDA call is checked (an Error naming the call on failure).

#include <cstddef>

#include "attnkit/kernels/paged_attention_params.h"
#include "kernels/cuda/cuda_plan.h"

namespace attnkit::cuda {

// A plan's arrays on the device plus the split-KV workspace.
//   partial_o   [num_partial_slots, num_heads, head_size_v] rows normalised per split: fp32
//               for CUDA_PAGED and CUDA_MLA; CUDA_FLASH stores them in its compute dtype
//               (fp16/bf16, as the output): half the bytes that the one CTA merging a
//               split group must read, on the critical path of long single-request decodes
//   partial_lse [num_partial_slots, num_heads] fp32, log2-sum-exp of each split's scores
//               (-inf when the split saw no key)
//   split_counters (below)
struct DevicePlan {
  const CudaWorkItem* small_items = nullptr;
  int num_small = 0;
  const CudaWorkItem* large_items = nullptr;
  int num_large = 0;
  const CudaCombineItem* combine_items = nullptr;
  int num_combine = 0;
  float* partial_o = nullptr;
  float* partial_lse = nullptr;
  // uint32[num_split_groups * num_kv_heads], zero between forwards: finished splits per
  // (split group, KV head); the CTA that finishes a group's last split merges it and
  // resets the count (CUDA_FLASH merges this way; CUDA_PAGED launches the combine).
  unsigned* split_counters = nullptr;
};

// Kernel geometry the planner must follow (PlanShape fields) for each backend.
struct KernelGeometry {
  int small_rows = 0;
  int large_rows = 0;
  int kv_tile = 0;
  // Small-row (decode) CTAs resident per SM: split-KV aims at one full wave of them.
  int small_ctas_per_sm = 4;
};
KernelGeometry paged_geometry(int head_size);
KernelGeometry flash_geometry(int head_size);

// Writes key/value rows into the cache at slot_mapping (CacheUpdateParams contract).
void launch_cache_update(const CacheUpdateParams& params);
// CUDA_PAGED: CUDA-core kernel, then the split-KV combine when the plan has splits.
void launch_paged_attention(const PagedAttentionParams& params, const DevicePlan& plan);
// CUDA_FLASH: tensor-core kernels (small-row and large-row); split-KV groups are merged
// in place by their last CTA (no combine launch).
// Its launches are programmatic dependent launches on sm_90+ (flash_launch.cuh).
struct FlashLaunchOptions {
  // fresh_kv.key set: the kernel writes this step's keys/values into the cache itself (no
  // cache-update launch); only for decode plans (no large-row items), causal self-attention
  // with the cache in the compute dtype and unit scales (can_fold_cache_update).
  CacheUpdateParams fresh_kv{};
};
bool can_fold_cache_update(const CacheUpdateParams& update, const PagedAttentionParams& params,
                           const DevicePlan& plan);
void launch_flash_attention(const PagedAttentionParams& params, const DevicePlan& plan,
                            const FlashLaunchOptions& options);

// Multiprocessors of the current device.
int current_device_sm_count();

}  // namespace attnkit::cuda
