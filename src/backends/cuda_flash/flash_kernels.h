#pragma once
// Host entry points of CUDA_FLASH's kernels (defined in the .cu files of this folder,
// compiled only when the build has CUDA). No CUDA types cross this header.

#include <array>

#include "attnkit/kernels/paged_attention_params.h"
#include "kernels/cuda/device_plan.h"

namespace attnkit::cuda {

// The head sizes CUDA_FLASH has kernel instances for (flash_attention_d<N>.cu, one per
// size, dispatched by launch_flash_attention): what its capabilities declare.
inline constexpr std::array<int, 3> kFlashHeadSizes = {64, 128, 256};

// The tile geometry of CUDA_FLASH's kernels for `head_size` (64, 128 or 256) and a cache in
// the compute dtype or (fp8_cache) in fp8, which the planner follows.
KernelGeometry flash_geometry(int head_size, bool fp8_cache);

// ATTNKIT_FLASH_FOLD_PREFILL_WRITE 0 keeps the separate cache-update launch in steps with
// large-row items on the Hopper kernels (bench/variants/nofold.h, for comparisons); 1 folds
// it into them (can_fold_cache_update).
#ifndef ATTNKIT_FLASH_FOLD_PREFILL_WRITE
#define ATTNKIT_FLASH_FOLD_PREFILL_WRITE 1
#endif

// CUDA_FLASH: tensor-core kernels (small-row and large-row); split-KV groups are merged
// in place by their last CTA (no combine launch).
// Its launches are programmatic dependent launches on sm_90+ (flash_launch.cuh).
struct FlashLaunchOptions {
  // fresh_kv.key set: the kernels write this step's keys/values into the cache themselves
  // (no cache-update launch): causal self-attention with the cache in the compute dtype and
  // unit scales, in plans without large-row items or whose large-row items run on the
  // Hopper prefill kernels (can_fold_cache_update).
  CacheUpdateParams fresh_kv{};
};
// hopper_prefill: the plan's large-row items run on the Hopper kernels
// (flash_hopper_prefill()), which read the step's own keys from the inputs and write each
// token once; the sm_80 large-row CTAs would copy the same keys once per row tile.
bool can_fold_cache_update(const CacheUpdateParams& update, const PagedAttentionParams& params,
                           const DevicePlan& plan, bool hopper_prefill);
// Whether this process runs CUDA_FLASH's large-row items on the Hopper kernels.
bool flash_hopper_prefill();
void launch_flash_attention(const PagedAttentionParams& params, const DevicePlan& plan,
                            const FlashLaunchOptions& options);

}  // namespace attnkit::cuda
