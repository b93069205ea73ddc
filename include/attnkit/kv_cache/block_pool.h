#pragma once
// The pool of physical cache blocks shared by every KV-cache group.
//
// Block ids are 0 .. num_blocks-1. Block 0 is the null block: it is never handed out and
// never freed; block tables use it for padding and for blocks a windowed group has
// released. Every other block is either free (ref count 0, on the free list) or in use
// (ref count >= 1, held by one or more block tables, e.g. when a prefix is shared).
//
// Running out of blocks is a normal, recoverable event: allocate() returns nullopt and
// changes nothing, so the scheduler can preempt a request and retry. Releasing a block
// that is not in use (double free, the null block, an id out of range) throws Error:
// it would otherwise hand one block to two owners.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "attnkit/export.h"

namespace attnkit {

class ATTNKIT_API BlockPool {
 public:
  static constexpr int32_t kNullBlock = 0;

  // num_blocks includes the null block, so at least 2. Error otherwise.
  explicit BlockPool(int num_blocks);

  int num_blocks() const { return static_cast<int>(ref_counts_.size()); }
  // Blocks that can ever be handed out (all but the null block).
  int num_usable_blocks() const { return num_blocks() - 1; }
  int num_free_blocks() const { return static_cast<int>(free_list_.size()); }
  int num_used_blocks() const { return num_usable_blocks() - num_free_blocks(); }

  // `count` distinct free blocks, each with ref count 1; all or nothing. nullopt (and no
  // change) when fewer than `count` are free. Error for a negative count.
  [[nodiscard]] std::optional<std::vector<int32_t>> allocate(int count);
  // One more owner of an in-use block (sharing). Error for a free or null block.
  void add_ref(int32_t block);
  // Drops one owner; the block returns to the free list when none is left.
  void release(int32_t block);
  void release(std::span<const int32_t> blocks);

  int ref_count(int32_t block) const;
  // Empty when consistent, else the first violation: a free-listed block with a non-zero
  // ref count, a block listed twice, or counts that do not add up.
  std::string check_invariants() const;

 private:
  void check_id(int32_t block, const char* operation) const;

  // Stack of free block ids; allocate() pops from the back. Initially N-1 .. 1, so fresh
  // pools hand out 1, 2, 3, ...
  std::vector<int32_t> free_list_;
  // [num_blocks]: owners of each block; the null block's entry stays 0.
  std::vector<int32_t> ref_counts_;
};

}  // namespace attnkit
