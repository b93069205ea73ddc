#pragma once
// CUDA_FLASH's Hopper prefill path (flash_wgmma_kernel.cuh), built for sm_90a in its own
// translation unit (sm90a/flash_wgmma.cu) when the build's CUDA architectures include 90
// (ATTNKIT_CUDA_SM90A). Host declarations only.

#include "attnkit/kernels/paged_attention_params.h"
#include "backends/cuda_flash/flash_kernels.h"

namespace attnkit::cuda {

// Rows per CTA of the Hopper prefill kernels (the planner's large_rows when they run).
inline constexpr int kFlashWgmmaRows = 128;

// Whether the large-row items of a CUDA_FLASH step run on the Hopper kernels: the binary
// carries them, the current device is compute capability 9.0 and ATTNKIT_CUDA_FLASH_WGMMA
// is not "0" (which keeps the sm_80 tensor-core kernels, for comparisons). Asked once.
bool flash_wgmma_enabled();

// Keys per copy-engine (TMA) load of the Hopper prefill kernel's whole K/V tiles for a
// step with these params (the block size, or the tile when blocks are larger), or 0 when
// every tile goes by cp.async (head sizes whose configuration does not use the copy
// engine, contiguous caches, block sizes not a multiple of 8 or not dividing into or out of
// the tile, strides or addresses the copy engine cannot take).
int flash_wgmma_tma_box_rows(const PagedAttentionParams& p);

// Runs `count` large-row items (fp16/bf16, head size 64, 128 or 256); a programmatic
// dependent launch on the device (kernel_launch.cuh). fresh_kv.key set: the kernels also
// write the step's new keys/values into the cache (can_fold_cache_update; 16-bit caches).
void launch_flash_wgmma_items(const PagedAttentionParams& p, const CudaWorkItem* items, int count,
                              const DevicePlan& plan, const CacheUpdateParams& fresh_kv);

}  // namespace attnkit::cuda
