#pragma once
// KV-cache specs per kind. Each constructor validates its arguments (Error naming the bad
// value) and returns a spec whose block_size is a placeholder: the cache planner
// (kv_cache_config.h) replaces it with the block size chosen from the backends that serve
// the layer's group.
//
// Bytes one token takes in one layer (KvCacheSpec::bytes_per_token):
//   num_kv_heads * (head_size + head_size_v) * dtype bytes     (K and V sizes may differ)
//   MLA: latent_width * dtype bytes, latent_width = kv_lora_rank + rope_dim, one "head",
//        no separate V (V is the first kv_lora_rank elements of the latent vector)
//   encoder-only: 0 (no cache at all)
//   state layers (mamba): 0 per token; StateLayerDims::bytes() per request
// Page size (one cache block of one layer) = block_size * bytes_per_token.

#include "attnkit/backend/selector_config.h"
#include "attnkit/core/kv_cache_spec.h"
#include "attnkit/export.h"

namespace attnkit {

// Dense K/V shape shared by the non-MLA kinds.
struct ATTNKIT_API KvHeadShape {
  int num_kv_heads = 0;
  int head_size = 0;                         // K head size
  int head_size_v = 0;                       // V head size (equal to head_size in most models)
  ScalarType dtype = ScalarType::kBFloat16;  // resolved storage dtype of the cache
};

ATTNKIT_API KvCacheSpec full_attention_spec(const KvHeadShape& shape);
ATTNKIT_API KvCacheSpec sliding_window_spec(const KvHeadShape& shape, int sliding_window);
ATTNKIT_API KvCacheSpec chunked_local_attention_spec(const KvHeadShape& shape, int chunk_size);
// Full attention over static sink tokens held in the cache ahead of every sequence
// (vLLM's meaning; the caller sets sink_len). Learned sink logits (gpt-oss) are not this
// kind: those layers stay full_attention / sliding_window.
ATTNKIT_API KvCacheSpec sink_full_attention_spec(const KvHeadShape& shape);
// Cross attention: decoder queries over the encoder's K/V, written once per request and
// sized by the encoder length (max_encoder_len tokens at most).
ATTNKIT_API KvCacheSpec cross_attention_spec(const KvHeadShape& shape, int max_encoder_len);
// MLA: one latent vector of kv_lora_rank + rope_dim elements per token.
ATTNKIT_API KvCacheSpec mla_spec(int kv_lora_rank, int rope_dim, ScalarType dtype);
ATTNKIT_API KvCacheSpec sliding_window_mla_spec(int kv_lora_rank, int rope_dim, ScalarType dtype,
                                                int sliding_window);
// A recurrent-state layer (kind mamba): one request's state per block (core/state_spec.h).
ATTNKIT_API KvCacheSpec state_spec(const StateLayerDims& dims);
// Encoder-only (and encoder self-) attention: no cache.
ATTNKIT_API KvCacheSpec encoder_only_attention_spec();

// The spec of one layer from its selector config: kind_of(config) picks the constructor;
// the storage dtype is scalar_type_of(kv_cache_dtype, dtype). MLA configs carry
// head_size = kv_lora_rank + rope dim and mla_rope_dim. Cross attention needs
// max_encoder_len > 0. Errors name the missing or bad field.
ATTNKIT_API KvCacheSpec spec_for_layer(const SelectorConfig& config, int max_encoder_len = 0);

// True when layers of this kind keep only a bounded range of recent tokens
// (sliding window, sliding-window MLA, chunked local).
ATTNKIT_API bool is_windowed(KvCacheKind kind);

}  // namespace attnkit
