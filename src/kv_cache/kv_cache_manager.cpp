#include "attnkit/kv_cache/kv_cache_manager.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>

namespace attnkit {
namespace {

int ceil_div(int a, int b) { return static_cast<int>((int64_t{a} + b - 1) / b); }

}  // namespace

int first_needed_position(const KvCacheSpec& spec, int first_new) {
  switch (spec.kind) {
    case KvCacheKind::kSlidingWindow:
    case KvCacheKind::kSlidingWindowMla:
      return std::max(0, first_new - spec.sliding_window + 1);
    case KvCacheKind::kChunkedLocalAttention:
      return first_new / spec.chunk_size * spec.chunk_size;
    default:
      return 0;
  }
}

std::string AllocationStatus::message() const {
  if (ok) return "ok";
  return fmt::format("out of KV-cache blocks: need {}, {} free", blocks_needed, blocks_free);
}

KvCacheManager::KvCacheManager(KvCacheConfig config, int num_blocks)
    : config_(std::move(config)), pool_(num_blocks) {}

void KvCacheManager::add_request(RequestId id, int encoder_len) {
  if (requests_.contains(id)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("request {} is already registered", id));
  }
  for (const KvCacheGroup& g : config_.groups) {
    if (g.spec.kind != KvCacheKind::kCrossAttention) continue;
    if (encoder_len <= 0 || encoder_len > g.spec.max_encoder_len) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("request {}: encoder length {} is invalid for this model's cross "
                              "attention (valid: 1..{})",
                              id, encoder_len, g.spec.max_encoder_len));
    }
  }
  Request r;
  r.encoder_len = encoder_len;
  r.tables.resize(config_.groups.size());
  r.num_released.assign(config_.groups.size(), 0);
  requests_.emplace(id, std::move(r));
}

const KvCacheManager::Request& KvCacheManager::request(RequestId id) const {
  auto it = requests_.find(id);
  if (it == requests_.end()) {
    throw Error(ErrorCode::kNotFound, fmt::format("request {} is not registered", id));
  }
  return it->second;
}

KvCacheManager::StepPlan KvCacheManager::plan_step(const Request& r, RequestId id,
                                                   int num_computed_tokens,
                                                   int num_new_tokens) const {
  if (num_computed_tokens < 0 || num_new_tokens < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("request {}: computed tokens {} and new tokens {} must be >= 0", id,
                            num_computed_tokens, num_new_tokens));
  }
  if (num_computed_tokens > r.num_tokens) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("request {}: {} computed tokens but only {} tokens have cache slots",
                            id, num_computed_tokens, r.num_tokens));
  }
  const int end = num_computed_tokens + num_new_tokens;
  StepPlan plan;
  plan.release_up_to.assign(config_.groups.size(), 0);
  plan.new_blocks.assign(config_.groups.size(), 0);
  for (const KvCacheGroup& g : config_.groups) {
    const auto gi = static_cast<size_t>(g.group_id);
    if (!g.has_cache()) continue;
    const std::vector<int32_t>& table = r.tables[gi];
    const int size = g.cache_block_size();
    if (g.spec.kind == KvCacheKind::kCrossAttention) {
      if (table.empty()) plan.new_blocks[gi] = ceil_div(r.encoder_len, size);
      plan.total_new += plan.new_blocks[gi];
      continue;
    }
    if (g.spec.is_state()) {
      // One block holds the request's whole state, from its first step to its last.
      if (table.empty() && end > 0) plan.new_blocks[gi] = 1;
      plan.total_new += plan.new_blocks[gi];
      continue;
    }
    const int needed_from = first_needed_position(g.spec, num_computed_tokens);
    if (needed_from < r.num_released[gi] * size) {
      throw Error(
          ErrorCode::kInvalidArgument,
          fmt::format("request {}: a step from position {} needs tokens from {} in "
                      "group {}, but blocks up to position {} were already released",
                      id, num_computed_tokens, needed_from, g.group_id, r.num_released[gi] * size));
    }
    const int releasable = std::min(needed_from / size, static_cast<int>(table.size()));
    plan.release_up_to[gi] = std::max(releasable, r.num_released[gi]);
    for (int i = r.num_released[gi]; i < plan.release_up_to[gi]; ++i) {
      if (pool_.ref_count(table[static_cast<size_t>(i)]) == 1) ++plan.total_freed;
    }
    plan.new_blocks[gi] = std::max(0, ceil_div(end, size) - static_cast<int>(table.size()));
    plan.total_new += plan.new_blocks[gi];
  }
  return plan;
}

int KvCacheManager::min_blocks_alone(int num_tokens, int encoder_len) const {
  int64_t blocks = 0;
  for (const KvCacheGroup& g : config_.groups) {
    if (!g.has_cache()) continue;
    const int size = g.cache_block_size();
    if (g.spec.kind == KvCacheKind::kCrossAttention) {
      blocks += ceil_div(encoder_len, size);
      continue;
    }
    if (num_tokens <= 0) continue;
    if (g.spec.is_state()) {
      ++blocks;
      continue;
    }
    const int first_kept = first_needed_position(g.spec, num_tokens - 1) / size;
    blocks += ceil_div(num_tokens, size) - first_kept;
  }
  return static_cast<int>(std::min<int64_t>(blocks, std::numeric_limits<int>::max()));
}

int KvCacheManager::num_blocks_needed(RequestId id, int num_computed_tokens,
                                      int num_new_tokens) const {
  const StepPlan plan = plan_step(request(id), id, num_computed_tokens, num_new_tokens);
  return std::max(0, plan.total_new - plan.total_freed);
}

AllocationStatus KvCacheManager::allocate_slots(RequestId id, int num_computed_tokens,
                                                int num_new_tokens) {
  auto it = requests_.find(id);
  if (it == requests_.end()) {
    throw Error(ErrorCode::kNotFound, fmt::format("request {} is not registered", id));
  }
  Request& r = it->second;
  const StepPlan plan = plan_step(r, id, num_computed_tokens, num_new_tokens);
  // Releases first: those blocks are outside every future query's window.
  for (size_t gi = 0; gi < config_.groups.size(); ++gi) {
    std::vector<int32_t>& table = r.tables[gi];
    for (int i = r.num_released[gi]; i < plan.release_up_to[gi]; ++i) {
      pool_.release(table[static_cast<size_t>(i)]);
      table[static_cast<size_t>(i)] = BlockPool::kNullBlock;
    }
    r.num_released[gi] = std::max(r.num_released[gi], plan.release_up_to[gi]);
  }
  AllocationStatus status;
  status.blocks_needed = plan.total_new;
  status.blocks_free = pool_.num_free_blocks();
  std::optional<std::vector<int32_t>> blocks = pool_.allocate(plan.total_new);
  if (!blocks) {
    status.ok = false;
    return status;
  }
  size_t next = 0;
  for (size_t gi = 0; gi < config_.groups.size(); ++gi) {
    for (int k = 0; k < plan.new_blocks[gi]; ++k) r.tables[gi].push_back((*blocks)[next++]);
  }
  r.num_tokens = std::max(r.num_tokens, num_computed_tokens + num_new_tokens);
  return status;
}

void KvCacheManager::free_request(RequestId id) {
  auto it = requests_.find(id);
  if (it == requests_.end()) {
    throw Error(ErrorCode::kNotFound, fmt::format("request {} is not registered", id));
  }
  for (const std::vector<int32_t>& table : it->second.tables) {
    // Tail first, so the most recent blocks are reused last (as vLLM frees).
    std::for_each(table.rbegin(), table.rend(), [&](int32_t b) {
      if (b != BlockPool::kNullBlock) pool_.release(b);
    });
  }
  requests_.erase(it);
}

std::span<const int32_t> KvCacheManager::block_table(RequestId id, int group_id) const {
  const Request& r = request(id);
  if (group_id < 0 || group_id >= static_cast<int>(r.tables.size())) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("group {} does not exist (valid: 0..{})", group_id,
                            static_cast<int>(r.tables.size()) - 1));
  }
  return r.tables[static_cast<size_t>(group_id)];
}

int KvCacheManager::num_tokens(RequestId id) const { return request(id).num_tokens; }
int KvCacheManager::encoder_len(RequestId id) const { return request(id).encoder_len; }

std::string KvCacheManager::check_invariants() const {
  if (std::string pool_issue = pool_.check_invariants(); !pool_issue.empty()) return pool_issue;
  std::map<int32_t, int> uses;
  for (const auto& [id, r] : requests_) {
    for (size_t gi = 0; gi < r.tables.size(); ++gi) {
      for (size_t i = 0; i < r.tables[gi].size(); ++i) {
        const int32_t b = r.tables[gi][i];
        const bool released = static_cast<int>(i) < r.num_released[gi];
        if (released != (b == BlockPool::kNullBlock)) {
          return fmt::format("request {} group {} entry {} is {} but {}", id, gi, i, b,
                             released ? "released" : "live");
        }
        if (b != BlockPool::kNullBlock) ++uses[b];
      }
    }
  }
  int used = 0;
  for (int32_t b = 1; b < pool_.num_blocks(); ++b) {
    const auto it = uses.find(b);
    const int n = it == uses.end() ? 0 : it->second;
    if (n != pool_.ref_count(b)) {
      return fmt::format("block {} is in {} block-table entries but has ref count {}", b, n,
                         pool_.ref_count(b));
    }
    if (n > 0) ++used;
  }
  if (used != pool_.num_used_blocks()) {
    return fmt::format("{} blocks in use but the pool counts {}", used, pool_.num_used_blocks());
  }
  return {};
}

}  // namespace attnkit
