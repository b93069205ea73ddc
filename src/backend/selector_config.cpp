#include "attnkit/backend/selector_config.h"

#include <fmt/format.h>

#include "attnkit/core/layer_kind.h"

namespace attnkit {

KvCacheKind kind_of(const SelectorConfig& c) {
  if (c.state) return KvCacheKind::kMamba;
  return layer_kind({c.attn_type, c.use_mla, c.sliding_window.has_value(), c.chunk_size.has_value(),
                     c.sink_len > 0});
}

std::string SelectorConfig::describe() const {
  if (state) return fmt::format("{} {}", state->describe(), to_string(dtype));
  std::string s = fmt::format("{} head_size={}", to_string(attn_type), head_size);
  if (head_size_v != head_size) s += fmt::format(" head_size_v={}", head_size_v);
  s += fmt::format(" {} kv={}", to_string(dtype), to_string(kv_cache_dtype));
  if (use_mla) s += fmt::format(" mla(rope={})", mla_rope_dim);
  if (sliding_window) s += fmt::format(" window={}", *sliding_window);
  if (chunk_size) s += fmt::format(" chunk={}", *chunk_size);
  if (has_sinks) s += " sinks";
  if (sink_len > 0) s += fmt::format(" sink_tokens={}", sink_len);
  if (soft_cap) s += fmt::format(" soft_cap={}", *soft_cap);
  if (block_size) s += fmt::format(" block_size={}", *block_size);
  if (batch_invariant) s += " batch_invariant";
  if (kv_connector) s += " kv_connector";
  return s;
}

}  // namespace attnkit
