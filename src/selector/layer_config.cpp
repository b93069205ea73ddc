#include "attnkit/selector/layer_config.h"

#include <fmt/format.h>

#include "attnkit/core/error.h"

namespace attnkit {

namespace {

void require_attention(const LayerSpec& layer) {
  if (!layer.needs_backend()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("Layer {} ('{}', {}) is not an attention layer: it needs no "
                            "attention backend",
                            layer.index, layer.name, layer.layer_type));
  }
}

}  // namespace

SelectorConfig selector_config(const LayerSpec& layer, DType dtype, KvCacheDType kv_cache_dtype,
                               std::optional<int> block_size) {
  require_attention(layer);
  SelectorConfig c;
  if (layer.state) {
    c.state = layer.state;
    c.dtype = dtype;
    c.kv_cache_dtype = resolve_kv_cache_dtype(KvCacheDType::kAuto, dtype);
    c.head_size = c.head_size_v = 0;
    return c;
  }
  c.head_size = layer.head_size;
  c.head_size_v = layer.head_size_v;
  c.num_heads = layer.num_heads;
  c.num_kv_heads = layer.num_kv_heads;
  c.dtype = dtype;
  c.kv_cache_dtype = resolve_kv_cache_dtype(kv_cache_dtype, dtype);
  c.block_size = block_size;
  c.use_mla = layer.mla.has_value();
  c.mla_rope_dim = layer.mla ? layer.mla->qk_rope_head_dim : 0;
  c.has_sinks = layer.has_sinks;
  c.sink_len = layer.sink_len;
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
  p.kv_cache_dtype = resolve_kv_cache_dtype(kv_cache_dtype, dtype);
  p.use_mla = layer.mla.has_value();
  p.mla_rope_dim = layer.mla ? layer.mla->qk_rope_head_dim : 0;
  p.state = layer.state;
  if (p.state) {
    p.kv_cache_dtype = resolve_kv_cache_dtype(KvCacheDType::kAuto, dtype);
  }
  return p;
}

}  // namespace attnkit
