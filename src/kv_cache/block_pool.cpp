#include "attnkit/kv_cache/block_pool.h"

#include <fmt/format.h>

#include "attnkit/core/error.h"

namespace attnkit {

BlockPool::BlockPool(int num_blocks) {
  if (num_blocks < 2) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("block pool needs at least 2 blocks (block 0 is the null block), "
                            "got {}",
                            num_blocks));
  }
  ref_counts_.assign(static_cast<size_t>(num_blocks), 0);
  free_list_.reserve(static_cast<size_t>(num_blocks - 1));
  for (int32_t b = num_blocks - 1; b >= 1; --b) free_list_.push_back(b);
}

std::optional<std::vector<int32_t>> BlockPool::allocate(int count) {
  if (count < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("block pool: cannot allocate {} blocks", count));
  }
  if (count > num_free_blocks()) return std::nullopt;
  std::vector<int32_t> blocks(static_cast<size_t>(count));
  for (auto& b : blocks) {
    b = free_list_.back();
    free_list_.pop_back();
    ATTNKIT_CHECK(ref_counts_[static_cast<size_t>(b)] == 0, "free block had owners");
    ref_counts_[static_cast<size_t>(b)] = 1;
  }
  return blocks;
}

void BlockPool::check_id(int32_t block, const char* operation) const {
  if (block <= kNullBlock || block >= num_blocks()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("block pool: cannot {} block {} (valid: 1..{}; 0 is the null block)",
                            operation, block, num_blocks() - 1));
  }
  if (ref_counts_[static_cast<size_t>(block)] == 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("block pool: cannot {} block {}: it is free", operation, block));
  }
}

void BlockPool::add_ref(int32_t block) {
  check_id(block, "share");
  ++ref_counts_[static_cast<size_t>(block)];
}

void BlockPool::release(int32_t block) {
  check_id(block, "release");
  if (--ref_counts_[static_cast<size_t>(block)] == 0) free_list_.push_back(block);
}

void BlockPool::release(std::span<const int32_t> blocks) {
  for (int32_t b : blocks) release(b);
}

int BlockPool::ref_count(int32_t block) const {
  if (block < 0 || block >= num_blocks()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("block pool: block {} out of range 0..{}", block, num_blocks() - 1));
  }
  return ref_counts_[static_cast<size_t>(block)];
}

std::string BlockPool::check_invariants() const {
  if (ref_counts_[kNullBlock] != 0) return "the null block has owners";
  std::vector<char> listed(ref_counts_.size(), 0);
  for (int32_t b : free_list_) {
    if (b <= kNullBlock || b >= num_blocks()) return fmt::format("free list holds id {}", b);
    if (listed[static_cast<size_t>(b)]) return fmt::format("block {} is free-listed twice", b);
    listed[static_cast<size_t>(b)] = 1;
    if (ref_counts_[static_cast<size_t>(b)] != 0) {
      return fmt::format("block {} is free-listed with ref count {}", b,
                         ref_counts_[static_cast<size_t>(b)]);
    }
  }
  for (int32_t b = 1; b < num_blocks(); ++b) {
    const int32_t rc = ref_counts_[static_cast<size_t>(b)];
    if (rc < 0) return fmt::format("block {} has ref count {}", b, rc);
    if (rc == 0 && !listed[static_cast<size_t>(b)]) {
      return fmt::format("block {} has no owner but is not free-listed (leak)", b);
    }
  }
  return {};
}

}  // namespace attnkit
