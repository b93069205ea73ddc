#pragma once
// Per-request, per-group block tables over one shared BlockPool.
//
// Block table of request r in group g: a vector of cache-block ids, entry i holding the
// K/V of token positions [i*S, (i+1)*S) (S = the group's cache block size). It grows as
// tokens are appended. Windowed groups release blocks no query can see any more:
//   sliding window W: a step whose first new token is at position c needs keys from
//     c - W + 1 on, so block i is released when (i+1)*S <= c - W + 1;
//   chunked local C: a step needs keys from floor(c/C)*C on, same test;
// a released entry becomes the null block (BlockPool::kNullBlock), so positions keep their
// index. Cross-attention groups get ceil(encoder_len/S) blocks once, on the request's first
// allocation; state groups (kind mamba) get one block, holding the request's whole state,
// on its first allocation and keep it to the end; encoder-only groups hold nothing.
//
// Running out of blocks is a status (AllocationStatus), never an exception or a partial
// allocation: the scheduler preempts a request (free_request) and retries.

#include <cstdint>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "attnkit/export.h"
#include "attnkit/kv_cache/block_pool.h"
#include "attnkit/kv_cache/kv_cache_config.h"

namespace attnkit {

using RequestId = int64_t;

struct ATTNKIT_API AllocationStatus {
  bool ok = true;
  int blocks_needed = 0;  // blocks the step needed from the pool (after its own releases)
  int blocks_free = 0;    // free blocks when the step was tried (after its releases)
  explicit operator bool() const { return ok; }
  // "out of KV-cache blocks: need 5, 2 free" or "ok".
  std::string message() const;
};

class ATTNKIT_API KvCacheManager {
 public:
  // num_blocks includes the null block.
  KvCacheManager(KvCacheConfig config, int num_blocks);

  const KvCacheConfig& config() const { return config_; }
  const BlockPool& pool() const { return pool_; }
  int num_free_blocks() const { return pool_.num_free_blocks(); }

  // Registers a request. encoder_len > 0 is required when the model has cross attention
  // (and at most the spec's max_encoder_len); Error for a duplicate id or a bad length.
  void add_request(RequestId id, int encoder_len = 0);
  bool has_request(RequestId id) const { return requests_.contains(id); }
  int num_requests() const { return static_cast<int>(requests_.size()); }

  // Blocks allocate_slots(id, c, n) would take from the pool, net of the blocks it releases.
  int num_blocks_needed(RequestId id, int num_computed_tokens, int num_new_tokens) const;

  // Gives the request's next num_new_tokens tokens (positions c .. c+n-1, c =
  // num_computed_tokens) a slot in every group. First releases blocks the windowed groups
  // no longer need (always safe: computed tokens only grow), then allocates all new
  // blocks or none. Error for an unknown id, negative counts, c beyond the tokens that
  // already have slots, or a step that needs positions a window already released.
  [[nodiscard]] AllocationStatus allocate_slots(RequestId id, int num_computed_tokens,
                                                int num_new_tokens);

  // The fewest blocks a request with `num_tokens` cached tokens (and `encoder_len`
  // encoder tokens) holds at once even when it runs alone: what its last step, one new
  // token at position num_tokens - 1, keeps in every group (windowed groups only the
  // blocks still visible). A request needing more than the pool's usable blocks can
  // never run; the scheduler refuses it at admission. Does not register anything.
  int min_blocks_alone(int num_tokens, int encoder_len = 0) const;

  // Returns every block of the request to the pool and forgets it. Error for unknown ids.
  void free_request(RequestId id);

  // The request's block table of `group_id`, in cache-block ids (empty without cache).
  std::span<const int32_t> block_table(RequestId id, int group_id) const;
  // Tokens of the request that have slots (the largest c + n allocated).
  int num_tokens(RequestId id) const;
  int encoder_len(RequestId id) const;

  // Empty when consistent: pool invariants hold and every block's ref count equals the
  // number of block-table entries naming it (no leak, no block in two places).
  std::string check_invariants() const;

 private:
  struct Request {
    int num_tokens = 0;
    int encoder_len = 0;
    std::vector<std::vector<int32_t>> tables;  // [group]
    std::vector<int> num_released;             // [group]: leading entries set to null
  };
  struct StepPlan {
    std::vector<int> release_up_to;  // [group]: release entries < this
    std::vector<int> new_blocks;     // [group]
    int total_new = 0;
    int total_freed = 0;
  };

  const Request& request(RequestId id) const;
  StepPlan plan_step(const Request& r, RequestId id, int num_computed_tokens,
                     int num_new_tokens) const;

  KvCacheConfig config_;
  BlockPool pool_;
  std::unordered_map<RequestId, Request> requests_;
};

// First token position a step starting at position `first_new` still needs in the cache of
// a group with `spec` (0 for unwindowed kinds).
ATTNKIT_API int first_needed_position(const KvCacheSpec& spec, int first_new);

}  // namespace attnkit
