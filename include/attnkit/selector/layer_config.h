#pragma once
// A model layer turned into the selector's question and into its implementation's
// parameters: the step from model/ (which knows only core/) to the backend protocol.

#include <optional>

#include "attnkit/backend/backend.h"
#include "attnkit/backend/selector_config.h"
#include "attnkit/export.h"
#include "attnkit/model/model_description.h"

namespace attnkit {

// The selector's question for one attention layer. `kv_cache_dtype` may be the user's
// kAuto: it is resolved here, once (resolve_kv_cache_dtype), so the config, the KV-cache
// spec made from it and the backends see a concrete dtype. Throws Error(kInvalidArgument)
// for a layer that is not attention.
ATTNKIT_API SelectorConfig selector_config(const LayerSpec& layer, DType dtype,
                                           KvCacheDType kv_cache_dtype,
                                           std::optional<int> block_size = std::nullopt);

// What the layer's implementation receives. Sink logits are weights, not configuration:
// for a layer with sinks the vector is sized num_heads and zero (a sink of logit 0) until
// the caller loads the checkpoint's values. kv_cache_dtype is resolved as in
// selector_config(). Throws like selector_config().
ATTNKIT_API AttentionLayerParams layer_params(const LayerSpec& layer, DType dtype,
                                              KvCacheDType kv_cache_dtype);

}  // namespace attnkit
