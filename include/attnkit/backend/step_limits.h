#pragma once
// Checks of the execution contract's StepLimits (core/execution.h), shared by the builders
// that reserve device memory.

#include <string_view>

#include "attnkit/backend/metadata.h"
#include "attnkit/core/execution.h"
#include "attnkit/export.h"

namespace attnkit {

// Every field of `limits` must be positive; otherwise Error(kInvalidArgument) naming the
// field and its value.
ATTNKIT_API void check_step_limits(const StepLimits& limits, std::string_view backend);

// A step beyond the limits a builder was reserved for: Error(kInvalidArgument) naming the
// step's value and the bound (request count, query tokens, block-table width, a request's
// sequence length).
ATTNKIT_API void check_within_limits(const CommonAttentionMetadata& common,
                                     const StepLimits& limits, std::string_view backend);

// A graph-shaped build (ExecutionContext::graph_shape) needs reserve() first: its split-KV
// partition is chosen for StepLimits::max_seq_len, and a captured graph needs buffers
// whose addresses never change.
ATTNKIT_API void require_reserved_for_graphs(const StepLimits& limits, std::string_view backend);

}  // namespace attnkit
