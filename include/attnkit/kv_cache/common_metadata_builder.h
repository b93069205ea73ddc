#pragma once
// Builds the per-step, per-group CommonAttentionMetadata (backend/metadata.h) from the
// scheduler's batch and the requests' block tables.
//
// For a group with cache block size S and kernel block size s (n = S/s), request i with
// c computed tokens and q new tokens (positions c .. c+q-1):
//   query_start_loc [B+1]  prefix sums of q, starting at 0
//   seq_lens [B]           c + q (decoder kinds); the encoder length (cross); q
//                          (encoder-only, whose whole sequence arrives in one step)
//   block_table [B, M]     row-major, in kernel blocks: cache block b of the request's
//                          table becomes kernel blocks b*n + j, j = 0..n-1; the null block
//                          (released by a window, or padding) stays null_block_id = 0;
//                          row i holds ceil(seq_lens[i] / s) entries, then 0-padding up to
//                          M = max over the batch (M = 0 without cache)
//   slot_mapping           decoder kinds: [num_actual_tokens], token at position p
//                          gets table[p/S]*S + p%S (equal to its kernel-block slot);
//                          encoder-only: [num_actual_tokens] of -1 (nothing is cached);
//                          cross: one slot per ENCODER token of the requests whose encoder
//                          K/V is written this step (write_encoder_kv), in batch order,
//                          positions 0..encoder_len-1; empty when every encoder K/V is
//                          already cached. Its rows match the fresh K/V passed to forward().
//   max_query_len, max_seq_len, num_actual_tokens = sum of q
//   causal                 false for encoder-only and cross attention
//   encoder_seq_lens [B]   cross only (= seq_lens); empty otherwise
//   block_size             s (kernel units), 0 without cache
// State groups (kind mamba): block_table row i is the request's one state block,
// slot_mapping is -1 for every token (the state is updated in place), block_size is 1.
// Errors (kInvalidArgument) name the request: a table too short for its tokens (forgot
// allocate_slots), a new token whose block was released, computed tokens in an
// encoder-only group, a cross request without an encoder length.

#include <span>
#include <vector>

#include "attnkit/backend/metadata.h"
#include "attnkit/export.h"
#include "attnkit/kv_cache/kv_cache_config.h"
#include "attnkit/kv_cache/kv_cache_manager.h"

namespace attnkit {

// One request of a step, as one group sees it.
struct ATTNKIT_API ScheduledRequest {
  int num_computed_tokens = 0;
  int num_new_tokens = 0;
  std::span<const int32_t> block_table;  // the group's table in cache-block ids
  int encoder_len = 0;                   // cross attention
  bool write_encoder_kv = false;         // cross: encoder K/V is written this step
};

ATTNKIT_API CommonAttentionMetadata build_common_metadata(const KvCacheGroup& group,
                                                          std::span<const ScheduledRequest> batch);

// One request of a step, by id (the tables come from the manager).
struct ATTNKIT_API StepRequest {
  RequestId id = 0;
  int num_computed_tokens = 0;
  int num_new_tokens = 0;
  bool write_encoder_kv = false;
};

// One CommonAttentionMetadata per group, indexed by group_id.
ATTNKIT_API std::vector<CommonAttentionMetadata> build_step_metadata(
    const KvCacheManager& kv, std::span<const StepRequest> batch);

}  // namespace attnkit
