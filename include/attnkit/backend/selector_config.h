#pragma once
// SelectorConfig: what a layer asks of an attention backend. The selector builds one per
// layer; backends answer with validate(). kind_of() derives the KV-cache group kind that
// backend_per_kind addresses.

#include <optional>
#include <string>

#include "attnkit/core/enums.h"
#include "attnkit/core/state_spec.h"
#include "attnkit/export.h"

namespace attnkit {

struct ATTNKIT_API SelectorConfig {
  int head_size = 128;    // K/Q head size (MLA: kv_lora_rank + rope dim, e.g. 576)
  int head_size_v = 128;  // V head size (MLA: kv_lora_rank, e.g. 512)
  int num_heads = 0;      // query heads (0 = unknown; only combination hooks use it)
  int num_kv_heads = 0;   // KV heads (0 = unknown)
  DType dtype = DType::kBFloat16;
  KvCacheDType kv_cache_dtype = KvCacheDType::kAuto;
  std::optional<int> block_size;  // a user-requested cache block size, if any
  bool use_mla = false;
  int mla_rope_dim = 0;    // MLA: rope part of head_size (e.g. 64)
  bool has_sinks = false;  // learned per-head sink logits (gpt-oss); the kind is unchanged
  // Static sink tokens held in the cache ahead of every sequence (vLLM's sink_len):
  // the layer is sink_full_attention.
  int sink_len = 0;
  std::optional<int> sliding_window;
  std::optional<int> chunk_size;  // chunked local attention
  std::optional<float> soft_cap;  // logit soft-capping
  AttentionType attn_type = AttentionType::kDecoder;
  bool batch_invariant = false;
  bool kv_connector = false;
  // A recurrent-state layer (kind mamba): what it keeps per request. The attention
  // fields above are then unused; dtype is the compute dtype of its inputs and outputs.
  std::optional<StateLayerDims> state;

  // Decoder self-attention is causal; encoder, encoder-only and cross attention are not.
  bool is_causal() const { return attn_type == AttentionType::kDecoder; }
  bool operator==(const SelectorConfig&) const = default;
  // Short human form, e.g. "decoder head_size=256 bf16 kv=auto window=512".
  std::string describe() const;
};

// The KV-cache group kind of a layer:
//   state layer                      -> mamba
//   encoder-only / encoder           -> encoder_only_attention
//   encoder-decoder (cross)          -> cross_attention
//   MLA (+ window)                   -> mla_attention (sliding_window_mla)
//   sliding window                   -> sliding_window
//   chunk size                       -> chunked_local_attention
//   static sink tokens (sink_len > 0) -> sink_full_attention
//   otherwise                        -> full_attention
ATTNKIT_API KvCacheKind kind_of(const SelectorConfig& config);

}  // namespace attnkit
