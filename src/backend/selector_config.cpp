#include "attnkit/backend/selector_config.h"

#include <fmt/format.h>

namespace attnkit {

KvCacheKind kind_of(const SelectorConfig& c) {
  switch (c.attn_type) {
    case AttentionType::kEncoder:
    case AttentionType::kEncoderOnly:
      return KvCacheKind::kEncoderOnlyAttention;
    case AttentionType::kEncoderDecoder:
      return KvCacheKind::kCrossAttention;
    case AttentionType::kDecoder:
      break;
  }
  if (c.use_mla) {
    return c.sliding_window ? KvCacheKind::kSlidingWindowMla : KvCacheKind::kMlaAttention;
  }
  if (c.sliding_window) return KvCacheKind::kSlidingWindow;
  if (c.chunk_size) return KvCacheKind::kChunkedLocalAttention;
  if (c.has_sinks) return KvCacheKind::kSinkFullAttention;
  return KvCacheKind::kFullAttention;
}

std::string SelectorConfig::describe() const {
  std::string s = fmt::format("{} head_size={}", to_string(attn_type), head_size);
  if (head_size_v != head_size) s += fmt::format(" head_size_v={}", head_size_v);
  s += fmt::format(" {} kv={}", to_string(dtype), to_string(kv_cache_dtype));
  if (use_mla) s += fmt::format(" mla(rope={})", mla_rope_dim);
  if (sliding_window) s += fmt::format(" window={}", *sliding_window);
  if (chunk_size) s += fmt::format(" chunk={}", *chunk_size);
  if (has_sinks) s += " sinks";
  if (soft_cap) s += fmt::format(" soft_cap={}", *soft_cap);
  if (block_size) s += fmt::format(" block_size={}", *block_size);
  if (batch_invariant) s += " batch_invariant";
  if (kv_connector) s += " kv_connector";
  return s;
}

}  // namespace attnkit
