#pragma once
// The scheduler's KvBlockAllocator over the KV-cache manager (kv_cache/kv_cache_manager.h):
// registers a request on its first allocation (with its encoder length, so cross
// attention gets its blocks), forgets it when freed, and releases out-of-window blocks
// after each step by asking for zero new tokens.

#include <set>
#include <vector>

#include "attnkit/kv_cache/kv_cache_manager.h"
#include "attnkit/runtime/scheduler.h"

namespace attnkit {

class ManagerBlockAllocator final : public KvBlockAllocator {
 public:
  explicit ManagerBlockAllocator(KvCacheManager& kv) : kv_(kv) {}

  bool allocate(const RequestSpec& request, int num_computed, int num_new) override;
  void release_invisible(const RequestSpec& request, int num_computed) override;
  void free(const RequestSpec& request) override;
  int num_usable_blocks() const override { return kv_.pool().num_usable_blocks(); }
  int min_blocks_alone(const RequestSpec& request) const override {
    return kv_.min_blocks_alone(request.total_computed_tokens(), request.encoder_len);
  }

  // Blocks each group holds now, over every live request (null entries excluded);
  // indexed by group id.
  std::vector<int> blocks_per_group() const;
  int blocks_in_use() const { return kv_.pool().num_used_blocks(); }

 private:
  KvCacheManager& kv_;
  std::set<int> live_;  // requests registered with the manager
};

}  // namespace attnkit
