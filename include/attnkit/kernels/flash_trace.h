#pragma once
// Timeline diagnostics of CUDA_FLASH's attention kernels, compiled in only when the build
// defines ATTNKIT_FLASH_TRACE (a separate build of cuda_attention_bench, `--trace`): one thread
// of every CTA (thread 0; in the Hopper prefill kernel the first consumer's first thread for
// the consumer's points) records %globaltimer (ns) at fixed points of its life into one device
// buffer, which the benchmark reads back and summarises per point (earliest, median, latest
// CTA), per phase between points, and per SM (the gap between one CTA and the next there).
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
  kTraceQLoaded,        // the Hopper prefill kernel: the first consumer's Q is in shared memory
  kTraceSmId,           // not a time: 1 + the SM the CTA ran on (the Hopper prefill kernel)
  kTraceFirstPacked,    // the Hopper prefill kernel: the first consumer's tile 0 softmax done
  kTraceLastPacked,     // the Hopper prefill kernel: the first consumer's last softmax done
  kTraceProducerDone,   // the Hopper prefill kernel: the producer's thread 0 done (copies
                        // issued and, when the launch writes the cache, its rows written)
  kTraceLoadsIssued,    // the Hopper prefill kernel's 16-bit producer: its last K/V copies
                        // issued (a launch that writes the cache: its write begins)
  kTraceOwnTilesIn,     // ... the folded write: the last resident own tile is in its stage
  kTraceWriteIssued,    // ... the folded write: every own row stored or handed to the copy
                        // engine (its wait for the copy engine's reads begins)
  kFlashTracePoints
};
inline constexpr int kFlashTraceCtas = 16384;

#if defined(ATTNKIT_FLASH_TRACE)
// The device buffer [kFlashTraceCtas][kFlashTracePoints] of uint64 ns, allocated on first
// use (src/kernels/cuda/flash_trace.cu).
ATTNKIT_API uint64_t* flash_trace_buffer();
#endif

}  // namespace attnkit::cuda
