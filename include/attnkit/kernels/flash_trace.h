#pragma once
// Timeline diagnostics of CUDA_FLASH's attention kernel, compiled in only when the build
// defines ATTNKIT_FLASH_TRACE (a separate build of cuda_attention_bench, `--trace`): thread 0
// of every CTA records %globaltimer (ns) at fixed points of its life into one device buffer,
// which the benchmark reads back and summarises per point (earliest, median, latest CTA).
// In every other build the marks are empty and nothing is allocated. The device side is
// src/backends/cuda_flash/flash_trace.cuh.

#include <cstdint>

#include "attnkit/export.h"

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
// use (src/kernels/cuda/flash_trace.cu).
ATTNKIT_API uint64_t* flash_trace_buffer();
#endif

}  // namespace attnkit::cuda
