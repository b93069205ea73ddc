#pragma once
// Fills the kernel contract (kernels/paged_attention_params.h) from one forward() call, so
// that every backend maps layer, tensors and metadata to kernel inputs the same way.
// Call check_forward() first: these helpers trust the shapes it checked.
//
// Pointers into the metadata (query_start_loc, seq_lens, block_table, slot_mapping,
// kv_start_loc) and sinks are the host copies; a device backend replaces them with its
// device copies. MLA: v_cache = k_cache with the same strides and v_scale = k_scale (V is
// the latent's prefix). fp8 caches use the layer's k/v scales, other caches 1.

#include "attnkit/backend/forward_check.h"
#include "attnkit/export.h"
#include "attnkit/kernels/paged_attention_params.h"

namespace attnkit {

// Attention over the paged cache, or, for encoder / encoder-only layers, over the fresh
// K/V rows (contiguous mode, kv_start_loc = query_start_loc).
ATTNKIT_API PagedAttentionParams paged_params_for(const ForwardArgs& args);

// Writing the fresh K/V rows into the cache at the slot mapping (writes_cache(args)).
ATTNKIT_API CacheUpdateParams cache_update_params_for(const ForwardArgs& args);

// The fields of the two above that the layer alone decides (dtypes, head counts and sizes,
// mask, scales; no tensor, no metadata, num_tokens 0): what selects a backend's kernels,
// for loading them before the first forward.
ATTNKIT_API PagedAttentionParams layer_params_for(const AttentionLayerParams& layer);
ATTNKIT_API CacheUpdateParams layer_cache_update_params_for(const AttentionLayerParams& layer);

}  // namespace attnkit
