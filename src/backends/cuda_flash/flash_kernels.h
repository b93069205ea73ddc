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
  // fresh_kv.key set: the kernel writes this step's keys/values into the cache itself (no
  // cache-update launch); only for decode plans (no large-row items), causal self-attention
  // with the cache in the compute dtype and unit scales (can_fold_cache_update).
  CacheUpdateParams fresh_kv{};
};
bool can_fold_cache_update(const CacheUpdateParams& update, const PagedAttentionParams& params,
                           const DevicePlan& plan);
void launch_flash_attention(const PagedAttentionParams& params, const DevicePlan& plan,
                            const FlashLaunchOptions& options);

}  // namespace attnkit::cuda
