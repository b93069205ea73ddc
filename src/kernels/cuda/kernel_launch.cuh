#pragma once
// Launch helpers shared by the launch functions of every CUDA backend: loading a kernel
// ahead of its first launch, the dynamic shared-memory opt-in and cudaLaunchKernelEx with
// an optional programmatic dependent launch. Every call is checked.

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdlib>
#include <string_view>
#include <utility>

#include "attnkit/core/options.h"
#include "kernels/cuda/cuda_check.h"

namespace attnkit::cuda {

// Loads `kernel` now: under lazy module loading the runtime loads a kernel when it is
// first referenced, and that load waits for the device's work in flight (DevicePlan::
// load_only says why it must not happen inside a forward). Call it from a function-local
// static initialiser: once per kernel.
template <typename... Params>
bool load_kernel(void (*kernel)(Params...)) {
  cudaFuncAttributes attributes{};
  ATTNKIT_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
  return true;
}

// Loads `kernel` and lets it use `bytes` of dynamic shared memory (above the 48 KiB
// default). Call it from a function-local static initialiser: once per kernel.
template <typename... Params>
bool allow_dynamic_smem(void (*kernel)(Params...), size_t bytes) {
  load_kernel(kernel);
  ATTNKIT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(bytes)));
  return true;
}

// Whether launches may be programmatic dependent launches: the device runs them (sm_90+)
// and ATTNKIT_CUDA_DEPENDENT_LAUNCH (core/options.h) is not off (the switch serves A/B
// measurements and bisecting). Asked once per process.
inline bool dependent_launch_enabled() {
  static const bool enabled = [] {
    if (option_switch(Option::kCudaDependentLaunch) == false) return false;
    int device = 0, major = 0;
    ATTNKIT_CUDA_CHECK(cudaGetDevice(&device));
    ATTNKIT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    return major >= 9;
  }();
  return enabled;
}

// Launches `kernel` on `stream` (the step's, ExecutionContext::stream). With
// `programmatic` (and dependent_launch_enabled()), as a programmatic dependent launch: its
// CTAs may start while the previous grid in the stream still runs (once that grid's CTAs
// have all called let_next_grid_start, or exited), so the kernel must call
// wait_for_previous_grid before it touches anything but metadata uploaded before that grid.
template <typename... Params, typename... Args>
void launch_kernel_ex(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem_bytes,
                      cudaStream_t stream, bool programmatic, Args&&... args) {
  programmatic = programmatic && dependent_launch_enabled();
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem_bytes;
  config.stream = stream;
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
