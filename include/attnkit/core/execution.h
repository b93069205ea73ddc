#pragma once
// The GPU execution contract (docs/embedding.md): where a step's device work runs, and the
// bounds within which a metadata builder has everything it needs.
//
//   1. Once, per KV-cache group: builder->reserve(limits) allocates the builder's device
//      workspace (or takes the caller's, of at least builder->workspace_bytes(limits)) and
//      its pinned host staging.
//   2. Each step: builder->build(common, ctx) plans on the host into pinned staging and
//      uploads it with one asynchronous copy on ctx.stream; impl->forward(..., ctx)
//      launches on ctx.stream.
//   After reserve(), build() and forward() of steps within the limits make no allocation,
//   no free and no synchronising call; every launch and copy goes to ctx.stream, so they
//   may run on a caller's stream with other work queued on it, and forward() may be
//   captured into a CUDA graph (see CudaGraphSupport in backend/capabilities.h for which
//   batches a captured graph may be replayed with).
// CPU backends run synchronously on the calling thread and ignore the stream.

#include <cstddef>

#include "attnkit/export.h"

namespace attnkit {

struct ATTNKIT_API ExecutionContext {
  // The caller's cudaStream_t, as a plain pointer so that no CUDA header crosses the API;
  // nullptr is the legacy default stream.
  void* stream = nullptr;
  // This step's plan must have the shape a captured CUDA graph was recorded with: its work
  // partition depends only on the batch's shape (request count, query tokens of each
  // request, block-table width), never on the sequence lengths, so that a graph captured
  // after one such build may be replayed after any other build of the same batch shape.
  // Needs reserve() with StepLimits::max_seq_len (the split-KV partition is chosen for it).
  bool graph_shape = false;
};

// The largest step a builder is reserved for.
struct ATTNKIT_API StepLimits {
  int max_num_reqs = 0;
  int max_num_tokens = 0;      // query tokens of one step, over all requests
  int max_blocks_per_req = 0;  // width of the block table (in kernel blocks)
  int max_seq_len = 0;         // keys one request attends over
};

}  // namespace attnkit
