#include "attnkit/kv_cache/kv_memory_report.h"

#include <fmt/format.h>

#include <algorithm>

namespace attnkit {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Blocks covering positions [first, last_exclusive).
int64_t blocks_covering(int64_t first, int64_t last_exclusive, int64_t block_size) {
  if (last_exclusive <= first) return 0;
  return ceil_div(last_exclusive, block_size) - first / block_size;
}

}  // namespace

int64_t blocks_held(const KvCacheGroup& group, int64_t context_len) {
  if (!group.has_cache()) return 0;
  const KvCacheSpec& spec = group.spec;
  const int64_t size = spec.block_size;
  switch (spec.kind) {
    case KvCacheKind::kCrossAttention:
      return ceil_div(spec.max_encoder_len, size);
    case KvCacheKind::kSlidingWindow:
    case KvCacheKind::kSlidingWindowMla:
      return blocks_covering(std::max<int64_t>(0, context_len - spec.sliding_window + 1),
                             context_len, size);
    case KvCacheKind::kChunkedLocalAttention:
      return blocks_covering(context_len / spec.chunk_size * spec.chunk_size, context_len, size);
    case KvCacheKind::kMamba:
      return context_len > 0 ? 1 : 0;  // the request's whole state, whatever its length
    default:
      return blocks_covering(0, context_len, size);
  }
}

double KvMemoryReport::saving() const {
  if (full_attention_bytes == 0) return 0.0;
  return 1.0 - static_cast<double>(bytes_held) / static_cast<double>(full_attention_bytes);
}

std::string KvMemoryReport::to_text() const {
  std::string out = fmt::format("KV cache per request at {} tokens:\n", context_len);
  for (const KvGroupMemory& g : groups) {
    if (g.state_bytes > 0) {
      out += fmt::format("  group {:2}: {:<44} {:3} layers  recurrent state per request {:12} B\n",
                         g.group_id, g.spec, g.num_layers, g.bytes_held);
      continue;
    }
    out += fmt::format(
        "  group {:2}: {:<44} {:3} layers  {:7} B/token  {:8} tokens held  {:12} B\n", g.group_id,
        g.spec, g.num_layers, g.bytes_per_token, g.tokens_held, g.bytes_held);
  }
  out += fmt::format(
      "  total: {} B/token, {} B held ({} B of pool blocks); every layer as full "
      "attention: {} B; saving {:.1f}%\n",
      bytes_per_token, bytes_held, pool_bytes_held, full_attention_bytes, 100.0 * saving());
  return out;
}

KvMemoryReport kv_memory_report(const KvCacheConfig& config, int64_t context_len) {
  if (context_len < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("context length must be >= 0, got {}", context_len));
  }
  KvMemoryReport report;
  report.context_len = context_len;
  for (const KvCacheGroup& g : config.groups) {
    KvGroupMemory m;
    m.group_id = g.group_id;
    m.spec = g.spec.describe();
    m.num_layers = static_cast<int>(g.layer_indices.size());
    m.block_size = g.spec.block_size;
    m.bytes_per_token = g.bytes_per_token();
    m.blocks_held = blocks_held(g, context_len);
    if (g.spec.is_state()) {
      // No tokens: a fixed state per layer (state_bytes, before padding to the page).
      m.state_bytes = g.spec.state_bytes() * g.layer_indices.size();
      m.bytes_held = m.blocks_held > 0 ? m.state_bytes : 0;
      report.bytes_held += m.bytes_held;
      report.pool_bytes_held += static_cast<size_t>(m.blocks_held) * config.bytes_per_block();
      // The baseline keeps state layers as they are: they have no heads to cache per token.
      report.full_attention_bytes += m.bytes_held;
      report.groups.push_back(std::move(m));
      continue;
    }
    m.tokens_held = m.blocks_held * g.spec.block_size;
    m.bytes_held = static_cast<size_t>(m.tokens_held) * m.bytes_per_token;
    report.bytes_per_token += m.bytes_per_token;
    report.bytes_held += m.bytes_held;
    report.pool_bytes_held += static_cast<size_t>(m.blocks_held) * config.bytes_per_block();
    const int64_t full_tokens =
        g.spec.kind == KvCacheKind::kCrossAttention
            ? m.tokens_held
            : (g.has_cache() ? ceil_div(context_len, g.spec.block_size) * g.spec.block_size : 0);
    report.full_attention_bytes += static_cast<size_t>(full_tokens) * m.bytes_per_token;
    report.groups.push_back(std::move(m));
  }
  return report;
}

}  // namespace attnkit
