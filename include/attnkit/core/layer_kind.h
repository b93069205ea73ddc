#pragma once
// The KV-cache kind of an attention layer, from the facts that decide it; the one rule
// behind kind_of(SelectorConfig) (backend/selector_config.h) and LayerSpec::kind
// (model/model_description.h).

#include "attnkit/core/enums.h"
#include "attnkit/export.h"

namespace attnkit {

struct ATTNKIT_API LayerKindFacts {
  AttentionType attn_type = AttentionType::kDecoder;
  bool use_mla = false;
  bool sliding_window = false;
  bool chunked = false;
  // Static sink tokens held in the cache ahead of every sequence (vLLM's sink_len). Learned
  // per-head sink logits (gpt-oss) are a softmax term, not cached tokens: they do not
  // change the kind.
  bool sink_tokens = false;
};

// Encoder self-attention -> encoder_only; cross -> cross_attention; else MLA (sliding or
// not), sliding window, chunked local, static sink tokens (sink_full_attention), full, in that
// order.
ATTNKIT_API KvCacheKind layer_kind(const LayerKindFacts& facts);

}  // namespace attnkit
