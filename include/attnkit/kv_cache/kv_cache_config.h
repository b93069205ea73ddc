#pragma once
// Planning the KV cache of a model: which layers share a KV-cache group, each group's
// block sizes, and one page size for the whole block pool.
//
// The rule (also in docs/kv_cache.md), vLLM's hybrid-allocator rule with a per-group
// block size:
//  1. Each layer's spec goes through its backend's customize_spec(). Layers whose specs
//     are equal (block size ignored) form a bucket.
//  2. Each bucket's block size comes from the backends serving it (block_size.h).
//  3. Page sizes are unified so one block pool serves every group: P = lcm of the
//     buckets' page sizes (block_size * bytes_per_token * ... of one layer); a bucket with
//     page p gets its block size scaled by P/p. Every backend must accept the scaled size,
//     else Error. (vLLM takes the largest page and requires the others to divide it; the
//     lcm is the same when they do, and still works when they do not.)
//  4. Buckets are split into groups of equal size G so that one block id means the same
//     number of bytes for every group: G = the smallest bucket's layer count, or the
//     largest one's when that is < 1.25x the smallest (fewer padding layers). A bucket of
//     n layers becomes ceil(n/G) groups, group i taking layers i, i+k, i+2k, ... of the
//     bucket (k = ceil(n/G)), as vLLM does.
//  5. The cache has G buffers ("tensors") of num_blocks * P bytes; the j-th layer of every
//     group uses buffer j. A block id is owned by one group at a time, so the groups never
//     touch each other's bytes. A group with fewer than G layers leaves buffers unused for
//     its blocks ("padding layers").
// Encoder-only layers hold no cache: they form groups of their own (one per spec) with no
// blocks, no block table and no buffer; they still get per-step metadata.

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "attnkit/backend/backend.h"
#include "attnkit/core/kv_cache_spec.h"
#include "attnkit/export.h"

namespace attnkit {

// What the planner needs of one attention layer.
struct ATTNKIT_API LayerKvInput {
  int layer_index = 0;
  KvCacheSpec spec;                           // from spec_for_layer() (block size ignored)
  const AttentionBackend* backend = nullptr;  // selected for this layer; not owned
};

struct ATTNKIT_API KvCacheGroup {
  int group_id = 0;
  // The group's spec, after customize_spec; spec.block_size = cache block size.
  KvCacheSpec spec;
  // Tokens per kernel block; divides spec.block_size (virtual splitting when smaller).
  int kernel_block_size = 0;
  // Block size chosen from the backends before page-size unification scaled it.
  int chosen_block_size = 0;
  bool user_block_size = false;
  // Model layer indices, ascending. layer_indices[j] uses cache buffer j.
  std::vector<int> layer_indices;
  // Parallel to layer_indices: the backend name and KV layout of each layer.
  std::vector<std::string> layer_backends;
  std::vector<KvLayout> layer_layouts;

  bool has_cache() const { return spec.has_cache(); }
  int cache_block_size() const { return spec.block_size; }
  // Kernel blocks per cache block (1 = no virtual splitting); 0 without cache.
  int kernel_blocks_per_block() const {
    return kernel_block_size > 0 ? spec.block_size / kernel_block_size : 0;
  }
  // KV bytes one token takes over all layers of the group.
  size_t bytes_per_token() const { return spec.bytes_per_token() * layer_indices.size(); }
  // Distinct backend names, in layer order.
  std::vector<std::string> backend_names() const;
};

struct ATTNKIT_API KvCacheConfig {
  // Ordered by first layer index; group_id = position.
  std::vector<KvCacheGroup> groups;
  // Bytes of one cache block of one layer, equal for every cache-holding group; 0 when no
  // layer has a cache.
  size_t page_size_bytes = 0;
  // Cache buffers G (see rule 5); 0 when no layer has a cache.
  int num_buffers = 0;

  // Bytes one block id costs over all buffers: num_buffers * page_size_bytes.
  size_t bytes_per_block() const { return static_cast<size_t>(num_buffers) * page_size_bytes; }
  // Blocks (null block included) that fit in `bytes`; 0 when no layer has a cache (the
  // manager then still needs a pool of 2 blocks, which costs no memory).
  int num_blocks_for_bytes(size_t bytes) const;
  // The group holding `layer_index` and the buffer it uses; Error(kNotFound) when no group
  // holds it.
  const KvCacheGroup& group_of_layer(int layer_index, int* buffer_index = nullptr) const;
  // One line per group, e.g. "group 0: sliding_window(512) ... layers 0,6,12,18 block 16".
  std::string describe() const;
};

// Plans the cache for `layers` (distinct layer indices, each with a backend). Errors name
// the bad layer, size or backend.
ATTNKIT_API KvCacheConfig plan_kv_cache(std::span<const LayerKvInput> layers,
                                        std::optional<int> user_block_size = std::nullopt);

}  // namespace attnkit
