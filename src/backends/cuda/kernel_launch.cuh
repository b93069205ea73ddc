#pragma once
// Launch helpers shared by CUDA_FLASH's kernels (flash_launch.cuh, sm90a/flash_wgmma.cu):
// the dynamic shared-memory opt-in and cudaLaunchKernelEx with an optional programmatic
// dependent launch. Every call is checked.

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "backends/cuda/cuda_check.h"

namespace attnkit::cuda {

// Lets `kernel` use `bytes` of dynamic shared memory (above the 48 KiB default). Call it
// from a function-local static initialiser: once per kernel.
template <typename... Params>
bool allow_dynamic_smem(void (*kernel)(Params...), size_t bytes) {
  ATTNKIT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(bytes)));
  return true;
}

// Launches `kernel` on the default stream (as every launch of the CUDA backends). With
// `programmatic`, as a programmatic dependent launch: it may start while the previous grid
// in the stream still runs and must wait for it (griddepcontrol.wait) before touching
// that grid's results (sm_90+ only; the caller checks the device).
template <typename... Params, typename... Args>
void launch_kernel_ex(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem_bytes,
                      bool programmatic, Args&&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem_bytes;
  config.stream = nullptr;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  if (programmatic) {
    config.attrs = &attribute;
    config.numAttrs = 1;
  }
  ATTNKIT_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

}  // namespace attnkit::cuda
