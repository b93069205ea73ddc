// The device buffer of CUDA_FLASH's timeline diagnostics (attnkit/kernels/flash_trace.h),
// allocated on first use in builds that define ATTNKIT_FLASH_TRACE.
#include "attnkit/kernels/flash_trace.h"

#if defined(ATTNKIT_FLASH_TRACE)
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"

namespace attnkit::cuda {

uint64_t* flash_trace_buffer() {
  static uint64_t* buffer = [] {
    void* p = nullptr;
    const size_t bytes = sizeof(uint64_t) * kFlashTraceCtas * kFlashTracePoints;
    ATTNKIT_CUDA_CHECK(cudaMalloc(&p, bytes));
    ATTNKIT_CUDA_CHECK(cudaMemset(p, 0, bytes));
    return static_cast<uint64_t*>(p);
  }();
  return buffer;
}

}  // namespace attnkit::cuda
#endif
