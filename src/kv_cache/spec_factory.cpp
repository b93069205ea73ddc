#include "attnkit/kv_cache/spec_factory.h"

#include <fmt/format.h>

#include <string_view>

namespace attnkit {
namespace {

void require_positive(int value, std::string_view what, std::string_view kind) {
  if (value <= 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} spec: {} must be > 0, got {}", kind, what, value));
  }
}

KvCacheSpec dense_spec(KvCacheKind kind, const KvHeadShape& shape) {
  const std::string_view name = to_string(kind);
  require_positive(shape.num_kv_heads, "num_kv_heads", name);
  require_positive(shape.head_size, "head_size", name);
  require_positive(shape.head_size_v, "head_size_v", name);
  KvCacheSpec spec;
  spec.kind = kind;
  spec.num_kv_heads = shape.num_kv_heads;
  spec.head_size = shape.head_size;
  spec.head_size_v = shape.head_size_v;
  spec.dtype = shape.dtype;
  return spec;
}

KvCacheSpec latent_spec(KvCacheKind kind, int kv_lora_rank, int rope_dim, ScalarType dtype) {
  const std::string_view name = to_string(kind);
  require_positive(kv_lora_rank, "kv_lora_rank", name);
  if (rope_dim < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} spec: rope_dim must be >= 0, got {}", name, rope_dim));
  }
  KvCacheSpec spec;
  spec.kind = kind;
  spec.num_kv_heads = 1;
  spec.head_size = kv_lora_rank + rope_dim;
  spec.head_size_v = 0;
  spec.dtype = dtype;
  return spec;
}

}  // namespace

KvCacheSpec full_attention_spec(const KvHeadShape& shape) {
  return dense_spec(KvCacheKind::kFullAttention, shape);
}

KvCacheSpec sliding_window_spec(const KvHeadShape& shape, int sliding_window) {
  require_positive(sliding_window, "sliding_window", to_string(KvCacheKind::kSlidingWindow));
  KvCacheSpec spec = dense_spec(KvCacheKind::kSlidingWindow, shape);
  spec.sliding_window = sliding_window;
  return spec;
}

KvCacheSpec chunked_local_attention_spec(const KvHeadShape& shape, int chunk_size) {
  require_positive(chunk_size, "chunk_size", to_string(KvCacheKind::kChunkedLocalAttention));
  KvCacheSpec spec = dense_spec(KvCacheKind::kChunkedLocalAttention, shape);
  spec.chunk_size = chunk_size;
  return spec;
}

KvCacheSpec sink_full_attention_spec(const KvHeadShape& shape) {
  return dense_spec(KvCacheKind::kSinkFullAttention, shape);
}

KvCacheSpec cross_attention_spec(const KvHeadShape& shape, int max_encoder_len) {
  require_positive(max_encoder_len, "max_encoder_len", to_string(KvCacheKind::kCrossAttention));
  KvCacheSpec spec = dense_spec(KvCacheKind::kCrossAttention, shape);
  spec.max_encoder_len = max_encoder_len;
  return spec;
}

KvCacheSpec mla_spec(int kv_lora_rank, int rope_dim, ScalarType dtype) {
  return latent_spec(KvCacheKind::kMlaAttention, kv_lora_rank, rope_dim, dtype);
}

KvCacheSpec sliding_window_mla_spec(int kv_lora_rank, int rope_dim, ScalarType dtype,
                                    int sliding_window) {
  require_positive(sliding_window, "sliding_window", to_string(KvCacheKind::kSlidingWindowMla));
  KvCacheSpec spec = latent_spec(KvCacheKind::kSlidingWindowMla, kv_lora_rank, rope_dim, dtype);
  spec.sliding_window = sliding_window;
  return spec;
}

KvCacheSpec state_spec(const StateLayerDims& dims) {
  validate_state_dims(dims);
  KvCacheSpec spec;
  spec.kind = KvCacheKind::kMamba;
  spec.num_kv_heads = 0;
  spec.head_size = 0;
  spec.head_size_v = 0;
  spec.dtype = dims.recurrent_dtype;
  spec.state = dims;
  return spec;
}

KvCacheSpec encoder_only_attention_spec() {
  KvCacheSpec spec;
  spec.kind = KvCacheKind::kEncoderOnlyAttention;
  spec.num_kv_heads = 0;
  spec.head_size = 0;
  spec.head_size_v = 0;
  return spec;
}

KvCacheSpec spec_for_layer(const SelectorConfig& config, int max_encoder_len) {
  const KvCacheKind kind = kind_of(config);
  if (kind == KvCacheKind::kMamba) {
    return state_spec(*config.state);
  }
  const ScalarType dtype = scalar_type_of(config.kv_cache_dtype, config.dtype);
  if (kind == KvCacheKind::kEncoderOnlyAttention) return encoder_only_attention_spec();
  if (kind == KvCacheKind::kMlaAttention || kind == KvCacheKind::kSlidingWindowMla) {
    // SelectorConfig carries MLA as head_size = kv_lora_rank + rope dim.
    const int kv_lora_rank = config.head_size - config.mla_rope_dim;
    if (kind == KvCacheKind::kMlaAttention)
      return mla_spec(kv_lora_rank, config.mla_rope_dim, dtype);
    return sliding_window_mla_spec(kv_lora_rank, config.mla_rope_dim, dtype,
                                   config.sliding_window.value_or(0));
  }
  const KvHeadShape shape{config.num_kv_heads, config.head_size, config.head_size_v, dtype};
  switch (kind) {
    case KvCacheKind::kFullAttention:
      return full_attention_spec(shape);
    case KvCacheKind::kSlidingWindow:
      return sliding_window_spec(shape, config.sliding_window.value_or(0));
    case KvCacheKind::kChunkedLocalAttention:
      return chunked_local_attention_spec(shape, config.chunk_size.value_or(0));
    case KvCacheKind::kSinkFullAttention: {
      KvCacheSpec spec = sink_full_attention_spec(shape);
      spec.sink_len = config.sink_len;
      return spec;
    }
    case KvCacheKind::kCrossAttention:
      return cross_attention_spec(shape, max_encoder_len);
    default:
      break;
  }
  throw Error(ErrorCode::kInternal,
              fmt::format("spec_for_layer: unhandled kind {}", to_string(kind)));
}

bool is_windowed(KvCacheKind kind) {
  return kind == KvCacheKind::kSlidingWindow || kind == KvCacheKind::kSlidingWindowMla ||
         kind == KvCacheKind::kChunkedLocalAttention;
}

}  // namespace attnkit
