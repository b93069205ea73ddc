#pragma once
// What one layer needs from the paged KV cache. Layers with equal specs share a KV-cache
// group. Pure data: the kv_cache/ layer groups, sizes and allocates from it, and a backend
// may adjust it (AttentionBackend::customize_spec).

#include <cstddef>
#include <optional>
#include <string>

#include "attnkit/core/enums.h"
#include "attnkit/core/state_spec.h"
#include "attnkit/export.h"

namespace attnkit {

struct ATTNKIT_API KvCacheSpec {
  KvCacheKind kind = KvCacheKind::kFullAttention;
  int block_size = 16;   // tokens per cache block
  int num_kv_heads = 0;  // MLA: 1 (one latent vector per token)
  int head_size = 0;     // K head size; MLA: latent width = kv_lora_rank + rope dim
  int head_size_v = 0;   // V head size; MLA: 0 (V is a prefix of the latent vector)
  ScalarType dtype = ScalarType::kBFloat16;  // resolved storage dtype of the cache
  int sliding_window = 0;   // kSlidingWindow / kSlidingWindowMla: tokens in the window
  int chunk_size = 0;       // kChunkedLocalAttention: tokens per chunk
  int max_encoder_len = 0;  // kCrossAttention: cache sized by the encoder length
  int sink_len = 0;         // kSinkFullAttention: static sink tokens ahead of every sequence
  // kMamba: the layer's per-request state. One cache block holds one request's whole
  // state (block_size is then meaningless); the planner pads it to the pool's page size.
  std::optional<StateLayerDims> state;
  bool operator==(const KvCacheSpec&) const = default;

  // KV bytes one token takes in this layer: num_kv_heads * (head_size + head_size_v) * bytes;
  // 0 for encoder-only attention (no cache) and for state layers (no per-token K/V).
  size_t bytes_per_token() const;
  // Bytes of one request's state (kMamba), else 0.
  size_t state_bytes() const { return state ? state->bytes() : 0; }
  bool is_state() const { return kind == KvCacheKind::kMamba; }
  // One block of this layer: block_size * bytes_per_token(); a state layer's block is its
  // state (before padding).
  size_t page_size_bytes() const {
    return is_state() ? state_bytes() : static_cast<size_t>(block_size) * bytes_per_token();
  }
  bool has_cache() const { return kind != KvCacheKind::kEncoderOnlyAttention; }
  // e.g. "sliding_window(512) 1x256+256 bf16 block 16"
  std::string describe() const;
};

}  // namespace attnkit
