#pragma once
// Checks every CUDA runtime call: a failure throws attnkit::Error naming the call, the
// file and line, and the runtime's message. Included only by CUDA translation units.

#include <cuda_runtime.h>

#include <string>

#include "attnkit/core/error.h"

namespace attnkit::cuda {

[[noreturn]] inline void throw_cuda_error(cudaError_t status, const char* call, const char* file,
                                          int line) {
  throw Error(status == cudaErrorMemoryAllocation ? ErrorCode::kOutOfMemory : ErrorCode::kInternal,
              std::string(call) + " failed at " + file + ":" + std::to_string(line) + ": " +
                  cudaGetErrorName(status) + ": " + cudaGetErrorString(status));
}

}  // namespace attnkit::cuda

#define ATTNKIT_CUDA_CHECK(call)                                                     \
  do {                                                                               \
    const cudaError_t attnkit_status_ = (call);                                      \
    if (attnkit_status_ != cudaSuccess) {                                            \
      ::attnkit::cuda::throw_cuda_error(attnkit_status_, #call, __FILE__, __LINE__); \
    }                                                                                \
  } while (false)

// After a kernel launch: reports launch-configuration errors at the launch site.
#define ATTNKIT_CUDA_CHECK_LAUNCH(kernel)                                                \
  do {                                                                                   \
    const cudaError_t attnkit_status_ = cudaGetLastError();                              \
    if (attnkit_status_ != cudaSuccess) {                                                \
      ::attnkit::cuda::throw_cuda_error(attnkit_status_, "launch of " #kernel, __FILE__, \
                                        __LINE__);                                       \
    }                                                                                    \
  } while (false)
