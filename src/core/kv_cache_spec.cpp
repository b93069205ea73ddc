#include "attnkit/core/kv_cache_spec.h"

#include <fmt/format.h>

namespace attnkit {

size_t KvCacheSpec::bytes_per_token() const {
  if (!has_cache() || is_state()) return 0;
  return static_cast<size_t>(num_kv_heads) * static_cast<size_t>(head_size + head_size_v) *
         size_of(dtype);
}

std::string KvCacheSpec::describe() const {
  std::string what(to_string(kind));
  if (sliding_window > 0) what += fmt::format("({})", sliding_window);
  if (chunk_size > 0) what += fmt::format("({})", chunk_size);
  if (max_encoder_len > 0) what += fmt::format("(encoder {})", max_encoder_len);
  if (sink_len > 0) what += fmt::format("({} sink tokens)", sink_len);
  if (!has_cache()) return what + " no cache";
  if (state) return fmt::format("{}({}) {} B per request", what, state->describe(), state_bytes());
  const std::string heads = head_size_v > 0
                                ? fmt::format("{}x{}+{}", num_kv_heads, head_size, head_size_v)
                                : fmt::format("{}x{}", num_kv_heads, head_size);
  return fmt::format("{} {} {} block {}", what, heads, to_string(dtype), block_size);
}

}  // namespace attnkit
