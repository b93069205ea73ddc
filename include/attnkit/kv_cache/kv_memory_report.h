#pragma once
// How much KV memory a planned cache takes, per group and in total, and what the hybrid
// layout saves over treating every layer as full attention. Pure data for `explain`.
//
// "Held tokens" of a group for one request of `context_len` tokens, at block granularity
// (what the block tables really hold once the next token is about to be decoded):
//   full / sink full / MLA: every block of positions 0 .. L-1
//   sliding window W:        blocks of positions max(0, L-W+1) .. L-1
//   chunked local C:         blocks of positions floor(L/C)*C .. L-1
//   cross:                   blocks of the max_encoder_len encoder positions
//   encoder-only:            nothing
//   state (mamba):           one block holding each layer's state, whatever L (no tokens)
// The full-attention baseline holds every block of positions 0 .. L-1 in every
// cache-holding layer (cross layers keep their encoder length; state layers their state).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "attnkit/export.h"
#include "attnkit/kv_cache/kv_cache_config.h"

namespace attnkit {

struct ATTNKIT_API KvGroupMemory {
  int group_id = 0;
  std::string spec;  // KvCacheSpec::describe()
  int num_layers = 0;
  int block_size = 0;          // cache block size
  size_t bytes_per_token = 0;  // over the group's layers, per held token
  int64_t blocks_held = 0;     // per request at context_len
  int64_t tokens_held = 0;     // blocks_held * block_size
  size_t bytes_held = 0;       // tokens_held * bytes_per_token (state groups: state_bytes)
  size_t state_bytes = 0;      // state groups: every layer's state, per request
};

struct ATTNKIT_API KvMemoryReport {
  int64_t context_len = 0;
  std::vector<KvGroupMemory> groups;
  size_t bytes_per_token = 0;  // all layers, per held token
  size_t bytes_held = 0;       // all groups, one request at context_len
  // What the pool spends on those blocks: blocks_held summed over groups times
  // bytes_per_block (includes the padding layers of groups smaller than num_buffers).
  size_t pool_bytes_held = 0;
  size_t full_attention_bytes = 0;  // baseline: every layer as full attention
  // 1 - bytes_held / full_attention_bytes (0 when the baseline is 0).
  double saving() const;
  // A small table, one line per group plus totals.
  std::string to_text() const;
};

// Blocks a group's block table holds (not released) for one request after `context_len`
// tokens (see the rule above).
ATTNKIT_API int64_t blocks_held(const KvCacheGroup& group, int64_t context_len);

ATTNKIT_API KvMemoryReport kv_memory_report(const KvCacheConfig& config, int64_t context_len);

}  // namespace attnkit
