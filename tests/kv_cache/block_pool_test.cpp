#include "attnkit/kv_cache/block_pool.h"

#include <gtest/gtest.h>

#include <set>

#include "attnkit/core/error.h"

namespace attnkit {
namespace {

TEST(BlockPool, NullBlockIsNeverHandedOut) {
  BlockPool pool(5);
  EXPECT_EQ(pool.num_usable_blocks(), 4);
  auto blocks = pool.allocate(4);
  ASSERT_TRUE(blocks.has_value());
  std::set<int32_t> ids(blocks->begin(), blocks->end());
  EXPECT_EQ(ids, (std::set<int32_t>{1, 2, 3, 4}));
  EXPECT_EQ(pool.num_free_blocks(), 0);
  EXPECT_EQ(pool.ref_count(BlockPool::kNullBlock), 0);
  EXPECT_EQ(pool.check_invariants(), "");
}

TEST(BlockPool, OutOfBlocksIsAStatusAndChangesNothing) {
  BlockPool pool(4);
  auto first = pool.allocate(2);
  ASSERT_TRUE(first.has_value());
  EXPECT_FALSE(pool.allocate(2).has_value());
  EXPECT_EQ(pool.num_free_blocks(), 1);
  EXPECT_EQ(pool.check_invariants(), "");
  auto last = pool.allocate(1);
  ASSERT_TRUE(last.has_value());
  EXPECT_EQ(pool.num_free_blocks(), 0);
  EXPECT_TRUE(pool.allocate(0).has_value());
}

TEST(BlockPool, RefCountedSharing) {
  BlockPool pool(3);
  const int32_t b = pool.allocate(1)->front();
  pool.add_ref(b);
  EXPECT_EQ(pool.ref_count(b), 2);
  pool.release(b);
  EXPECT_EQ(pool.num_free_blocks(), 1);  // still owned once
  pool.release(b);
  EXPECT_EQ(pool.num_free_blocks(), 2);
  EXPECT_EQ(pool.check_invariants(), "");
}

TEST(BlockPool, DoubleFreeNullAndOutOfRangeAreErrors) {
  BlockPool pool(3);
  const int32_t b = pool.allocate(1)->front();
  pool.release(b);
  EXPECT_THROW(pool.release(b), Error);
  EXPECT_THROW(pool.release(BlockPool::kNullBlock), Error);
  EXPECT_THROW(pool.release(3), Error);
  EXPECT_THROW(pool.add_ref(b), Error);
  EXPECT_THROW((void)pool.allocate(-1), Error);
  EXPECT_THROW(BlockPool(1), Error);
  try {
    pool.release(7);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("block 7"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("1..2"), std::string::npos) << e.what();
  }
  EXPECT_EQ(pool.check_invariants(), "");
}

}  // namespace
}  // namespace attnkit
