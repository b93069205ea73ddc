#include "runtime/kv_block_adapter.h"

namespace attnkit {

bool ManagerBlockAllocator::allocate(const RequestSpec& r, int num_computed, int num_new) {
  const bool fresh = !kv_.has_request(r.id);
  if (fresh) {
    kv_.add_request(r.id, r.encoder_len);
    live_.insert(r.id);
  }
  if (kv_.allocate_slots(r.id, num_computed, num_new)) return true;
  // A request refused at admission holds nothing: forget it until it is admitted.
  if (fresh) free(r);
  return false;
}

void ManagerBlockAllocator::release_invisible(const RequestSpec& r, int num_computed) {
  // No new tokens: only the windowed groups' releases happen (never fails).
  const AllocationStatus status = kv_.allocate_slots(r.id, num_computed, 0);
  ATTNKIT_CHECK(status.ok, "releasing out-of-window blocks cannot need new blocks");
}

void ManagerBlockAllocator::free(const RequestSpec& r) {
  if (!kv_.has_request(r.id)) return;
  kv_.free_request(r.id);
  live_.erase(r.id);
}

std::vector<int> ManagerBlockAllocator::blocks_per_group() const {
  std::vector<int> counts(kv_.config().groups.size(), 0);
  for (const int id : live_) {
    for (size_t g = 0; g < counts.size(); ++g) {
      for (const int32_t block : kv_.block_table(id, static_cast<int>(g))) {
        if (block != BlockPool::kNullBlock) ++counts[g];
      }
    }
  }
  return counts;
}

}  // namespace attnkit
