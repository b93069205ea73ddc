#pragma once
// What a step's CUDA kernels read besides the kernel contract (paged_attention_params.h):
// the work plan on the device (cuda_plan.h's items, uploaded by plan_upload.h) and the
// split-KV workspace; plus the CUDA building blocks every CUDA backend launches (the cache
// update) and the device facts the planner needs. No CUDA types cross this header, so
// host-side backend code includes it in every build and calls it only under ATTNKIT_HAS_CUDA.
//
// All pointers (params, plan arrays, workspace) are device pointers. Launches go to the
// plan's stream; every CUDA call is checked (an Error naming the call on failure).

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
  // The cudaStream_t every launch of the step goes to (ExecutionContext::stream; nullptr =
  // the legacy default stream).
  void* stream = nullptr;
  // Load only: the launch functions of the step's path configure and load every kernel the
  // path may launch (large-row kernels too) and launch nothing. Under lazy module loading
  // (CUDA's default) a kernel is loaded at its first use, and the load waits for the
  // device's work in flight: left to the first forward(), it would wait for the caller's
  // stream. A backend's implementation makes one such pass when it is created (no items).
  bool load_only = false;
};

// Kernel geometry the planner must follow (PlanShape fields): each backend states its own.
struct KernelGeometry {
  int small_rows = 0;
  int large_rows = 0;
  int kv_tile = 0;
  // Small-row (decode) CTAs resident per SM: split-KV aims at one full wave of them.
  int small_ctas_per_sm = 4;
};

// Writes key/value rows into the cache at slot_mapping (CacheUpdateParams contract).
// Launches on `stream` (a cudaStream_t; nullptr = the legacy default stream). With
// num_tokens 0 it only loads the kernels the params' dtypes select (DevicePlan::load_only).
void launch_cache_update(const CacheUpdateParams& params, void* stream);

// Multiprocessors of the current device.
int current_device_sm_count();

}  // namespace attnkit::cuda
