#pragma once
// The device side of flash_attention_kernel's timeline diagnostics (the points and the
// buffer: attnkit/kernels/flash_trace.h): flash_trace() marks a point, flash_trace_bind()
// hands a translation unit's kernels the buffer. Empty unless ATTNKIT_FLASH_TRACE is
// defined.

#include <cstdint>

#include "attnkit/core/error.h"
#include "attnkit/kernels/flash_trace.h"

namespace attnkit::cuda {

#if defined(__CUDACC__)
#if defined(ATTNKIT_FLASH_TRACE)
// One pointer per translation unit (each kernel instance reads its own), bound by that
// unit's flash_trace_bind (internal linkage, so its flag is per unit too).
namespace {
__device__ uint64_t* g_flash_trace;
void flash_trace_bind() {
  static const bool bound = [] {
    uint64_t* buffer = flash_trace_buffer();
    return cudaMemcpyToSymbol(g_flash_trace, &buffer, sizeof buffer) == cudaSuccess;
  }();
  if (!bound) throw Error(ErrorCode::kInternal, "flash trace: cudaMemcpyToSymbol failed");
}
}  // namespace
// This CTA's slot for `point` in the buffer, or null when `leader` is false or the CTA is
// past the buffer's kFlashTraceCtas.
__device__ __forceinline__ uint64_t* flash_trace_slot(int point, bool leader) {
  const unsigned cta = blockIdx.y * gridDim.x + blockIdx.x;
  return leader && cta < kFlashTraceCtas ? g_flash_trace + cta * kFlashTracePoints + point
                                         : nullptr;
}
__device__ __forceinline__ void flash_trace(int point, bool leader) {
  if (uint64_t* slot = flash_trace_slot(point, leader)) {
    uint64_t now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    *slot = now;
  }
}
// Records 1 + the SM this CTA runs on (kTraceSmId), so that the host can line up the CTAs
// each SM ran, one after another.
__device__ __forceinline__ void flash_trace_sm(bool leader) {
  if (uint64_t* slot = flash_trace_slot(kTraceSmId, leader)) {
    unsigned sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    *slot = uint64_t{sm} + 1u;
  }
}
#else
__device__ __forceinline__ void flash_trace(int, bool) {}
__device__ __forceinline__ void flash_trace_sm(bool) {}
inline void flash_trace_bind() {}
#endif
#endif

}  // namespace attnkit::cuda
