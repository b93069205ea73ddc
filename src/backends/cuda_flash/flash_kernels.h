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

// CUDA_FLASH: tensor-core kernels (small-row and large-row); split-KV groups are merged
// in place by their last CTA (no combine launch).
// Its launches are programmatic dependent launches on sm_90+ (flash_launch.cuh).
struct FlashLaunchOptions {
  // fresh_kv.key set: the kernels write this step's keys/values into the cache themselves
  // (no cache-update launch); only where can_fold_cache_update says so.
  CacheUpdateParams fresh_kv{};
};
// Whether large-row items write the cache themselves: they run on the Hopper prefill
// kernels (flash_wgmma_enabled) in this build and on this device, and the build folds
// (ATTNKIT_FLASH_FOLD_PREFILL_WRITE, flash_launch.cuh).
bool flash_prefill_folds_cache_update();
// Whether a step's cache update can be folded into its attention launch: causal
// self-attention, the cache in the compute dtype with unit scales, and large-row items
// only if prefill_folds (flash_prefill_folds_cache_update).
bool can_fold_cache_update(const CacheUpdateParams& update, const PagedAttentionParams& params,
                           const DevicePlan& plan, bool prefill_folds);
void launch_flash_attention(const PagedAttentionParams& params, const DevicePlan& plan,
                            const FlashLaunchOptions& options);

}  // namespace attnkit::cuda
