#include "attnkit/model/model_description.h"

#include <fmt/format.h>

#include <algorithm>

#include "attnkit/core/error.h"

namespace attnkit {

namespace {

void require_attention(const LayerSpec& layer) {
  if (!layer.is_attention) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("Layer {} ('{}', {}) is not an attention layer: it needs no "
                            "attention backend",
                            layer.index, layer.name, layer.layer_type));
  }
}

}  // namespace

int ModelDescription::num_attention_layers() const {
  return static_cast<int>(std::count_if(layers.begin(), layers.end(),
                                        [](const LayerSpec& l) { return l.is_attention; }));
}

SelectorConfig selector_config(const LayerSpec& layer, DType dtype, KvCacheDType kv_cache_dtype,
                               std::optional<int> block_size) {
  require_attention(layer);
  SelectorConfig c;
  c.head_size = layer.head_size;
  c.head_size_v = layer.head_size_v;
  c.num_heads = layer.num_heads;
  c.num_kv_heads = layer.num_kv_heads;
  c.dtype = dtype;
  c.kv_cache_dtype = kv_cache_dtype;
  c.block_size = block_size;
  c.use_mla = layer.mla.has_value();
  c.mla_rope_dim = layer.mla ? layer.mla->qk_rope_head_dim : 0;
  c.has_sinks = layer.has_sinks;
  c.sliding_window = layer.sliding_window;
  c.chunk_size = layer.chunk_size;
  c.soft_cap = layer.soft_cap;
  c.attn_type = layer.attn_type;
  return c;
}

AttentionLayerParams layer_params(const LayerSpec& layer, DType dtype,
                                  KvCacheDType kv_cache_dtype) {
  require_attention(layer);
  AttentionLayerParams p;
  p.layer_index = layer.index;
  p.kind = layer.kind;
  p.attn_type = layer.attn_type;
  p.num_heads = layer.num_heads;
  p.num_kv_heads = layer.num_kv_heads;
  p.head_size = layer.head_size;
  p.head_size_v = layer.head_size_v;
  p.scale = layer.scale;
  p.sliding_window = layer.sliding_window.value_or(0);
  p.chunk_size = layer.chunk_size.value_or(0);
  p.soft_cap = layer.soft_cap.value_or(0.0f);
  if (layer.has_sinks) p.sinks.assign(static_cast<size_t>(layer.num_heads), 0.0f);
  p.dtype = dtype;
  p.kv_cache_dtype = kv_cache_dtype;
  p.use_mla = layer.mla.has_value();
  p.mla_rope_dim = layer.mla ? layer.mla->qk_rope_head_dim : 0;
  return p;
}

std::string describe_kind(const LayerSpec& layer) {
  if (!layer.is_attention) return fmt::format("no attention ({})", layer.layer_type);
  const std::string_view kind = to_string(layer.kind);
  switch (layer.kind) {
    case KvCacheKind::kSlidingWindow:
    case KvCacheKind::kSlidingWindowMla:
      return fmt::format("{}({})", kind, layer.sliding_window.value_or(0));
    case KvCacheKind::kChunkedLocalAttention:
      return fmt::format("{}({})", kind, layer.chunk_size.value_or(0));
    default:
      return std::string(kind);
  }
}

}  // namespace attnkit
