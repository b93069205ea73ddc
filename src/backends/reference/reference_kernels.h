#pragma once
// The REFERENCE kernels: plain loops over the kernel contract
// (attnkit/kernels/paged_attention_params.h), accumulating in double. They are the oracle
// every other backend is checked against, so they favour obviousness over speed: one
// query row at a time, scores materialised, softmax with the max subtracted.
//
// Both are pure functions over raw host pointers. They check the contract's internal
// invariants (ATTNKIT_CHECK); user-facing validation happens in the backend's forward().

#include "attnkit/kernels/paged_attention_params.h"

namespace attnkit {

// out[t, h, :] for every query token t and head h (see PagedAttentionParams for the exact
// semantics: causal positions, window, chunk, sinks, soft-cap, paged or contiguous K/V).
void reference_paged_attention(const PagedAttentionParams& params);

// Writes key/value rows into the paged cache at slot_mapping (negative slots skipped),
// stored = quantize(x / scale) in the cache dtype.
void reference_cache_update(const CacheUpdateParams& params);

}  // namespace attnkit
