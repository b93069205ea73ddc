#pragma once
// Timeline diagnostics of flash_attention_kernel, compiled in only when the build defines
// ATTNKIT_FLASH_TRACE (a separate build of cuda_attention_bench, `--trace`): thread 0 of
// every CTA records %globaltimer (ns) at fixed points of its life into one buffer, which
// the bench summarises per point (earliest, median, latest CTA). In every other build the
// marks are empty functions and nothing is allocated.

#include <cstdint>

#include "attnkit/core/error.h"

namespace attnkit::cuda {

enum FlashTracePoint : int {
  kTraceStart = 0,      // kernel entry
  kTraceWaited,         // past wait_for_previous_grid
  kTraceFirstTile,      // the first K/V tile is in shared memory
  kTraceLoopDone,       // every tile consumed (epilogue begins)
  kTraceResultWritten,  // output or split partial written (merge check begins)
  kTraceCounted,        // split counter incremented (split CTAs only)
  kTraceMergeIssued,    // the last split's CTA: its partial loads are issued
  kTraceMergeLoaded,    // the group's partials are in shared memory (the last split's CTA)
  kTraceMerged,         // the group merged (the last split's CTA only)
  kFlashTracePoints
};
inline constexpr int kFlashTraceCtas = 16384;

#if defined(ATTNKIT_FLASH_TRACE)
// The device buffer [kFlashTraceCtas][kFlashTracePoints] of uint64 ns, allocated on first
// use (flash_dispatch.cu).
uint64_t* flash_trace_buffer();
#endif

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
__device__ __forceinline__ void flash_trace(int point, bool leader) {
  const unsigned cta = blockIdx.y * gridDim.x + blockIdx.x;
  if (leader && cta < kFlashTraceCtas) {
    uint64_t now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    g_flash_trace[cta * kFlashTracePoints + point] = now;
  }
}
#else
__device__ __forceinline__ void flash_trace(int, bool) {}
inline void flash_trace_bind() {}
#endif
#endif

}  // namespace attnkit::cuda
