#include "attnkit/kv_cache/common_metadata_builder.h"

#include <gtest/gtest.h>

#include <numeric>

#include "kv_cache/kv_test_support.h"

namespace attnkit {
namespace {

using testing::bf16_heads;
using testing::FakeBackend;

std::vector<int64_t> iota64(int64_t from, int count) {
  std::vector<int64_t> v(static_cast<size_t>(count));
  std::iota(v.begin(), v.end(), from);
  return v;
}

// A mixed batch on Llama-3.1-8B (block 16): a first prefill chunk, a decode, and a second
// prefill chunk. A fresh pool hands out blocks 1, 2, 3, ... in order.
TEST(CommonMetadata, MixedPrefillChunksAndDecodes) {
  const FakeBackend backend("ANY16", SizeRule::any(), 16);
  const auto layers = testing::layers_with(testing::llama31_8b_specs(), backend);
  KvCacheManager kv(plan_kv_cache(layers), 32);
  kv.add_request(10);
  kv.add_request(11);
  kv.add_request(12);
  ASSERT_TRUE(kv.allocate_slots(10, 0, 20));   // blocks 1, 2
  ASSERT_TRUE(kv.allocate_slots(11, 0, 37));   // blocks 3, 4, 5 (earlier steps)
  ASSERT_TRUE(kv.allocate_slots(11, 37, 1));   // decode of position 37: no new block
  ASSERT_TRUE(kv.allocate_slots(12, 0, 16));   // block 6
  ASSERT_TRUE(kv.allocate_slots(12, 16, 16));  // block 7

  const std::vector<StepRequest> batch{{10, 0, 20}, {11, 37, 1}, {12, 16, 16}};
  const auto all = build_step_metadata(kv, batch);
  ASSERT_EQ(all.size(), 1u);
  const CommonAttentionMetadata& m = all[0];
  EXPECT_EQ(m.num_reqs, 3);
  EXPECT_EQ(m.num_actual_tokens, 37);
  EXPECT_EQ(m.query_start_loc, (std::vector<int32_t>{0, 20, 21, 37}));
  EXPECT_EQ(m.seq_lens, (std::vector<int32_t>{20, 38, 32}));
  EXPECT_EQ(m.max_query_len, 20);
  EXPECT_EQ(m.max_seq_len, 38);
  EXPECT_TRUE(m.causal);
  EXPECT_EQ(m.block_size, 16);
  EXPECT_EQ(m.max_blocks_per_req, 3);
  EXPECT_EQ(m.block_table, (std::vector<int32_t>{1, 2, 0, 3, 4, 5, 6, 7, 0}));
  std::vector<int64_t> slots = iota64(16, 20);              // request 10: positions 0..19 in 1, 2
  slots.push_back(5 * 16 + 5);                              // request 11: position 37 in block 5
  for (int64_t s : iota64(7 * 16, 16)) slots.push_back(s);  // request 12: 16..31 in block 7
  EXPECT_EQ(m.slot_mapping, slots);
  EXPECT_TRUE(m.encoder_seq_lens.empty());
  EXPECT_EQ(m.null_block_id, 0);
}

// Cache blocks of 32 seen by a kernel that only runs 16-token blocks: every cache block b
// becomes kernel blocks 2b, 2b+1; the null block stays null; slots are the same number in
// both units.
TEST(CommonMetadata, VirtualSplittingExpandsBlockTables) {
  KvCacheGroup g;
  g.spec = full_attention_spec(bf16_heads(2, 64));
  g.spec.block_size = 32;
  g.kernel_block_size = 16;
  g.layer_indices = {0};
  const std::vector<int32_t> table{3, 0, 5};  // entry 1 released / padding
  const std::vector<int32_t> short_table{9};
  const std::vector<ScheduledRequest> batch{{70, 2, table}, {0, 17, short_table}};
  const CommonAttentionMetadata m = build_common_metadata(g, batch);
  EXPECT_EQ(m.block_size, 16);
  EXPECT_EQ(m.max_blocks_per_req, 5);  // ceil(72 / 16)
  EXPECT_EQ(m.block_table, (std::vector<int32_t>{6, 7, 0, 0, 10, 18, 19, 0, 0, 0}));
  // Positions 70, 71 are in cache block 5 at offsets 6, 7 = kernel block 10 offsets 6, 7.
  std::vector<int64_t> expected{5 * 32 + 6, 5 * 32 + 7};
  for (int64_t s : iota64(9 * 32, 17)) expected.push_back(s);
  EXPECT_EQ(m.slot_mapping, expected);
  EXPECT_EQ(m.slot_mapping[0], 10 * 16 + 6);
  // Every slot points into the kernel block the block table names for its position.
  for (int p = 70; p < 72; ++p) {
    const int64_t slot = m.slot_mapping[static_cast<size_t>(p - 70)];
    EXPECT_EQ(slot / 16, m.block_table[static_cast<size_t>(p / 16)]);
    EXPECT_EQ(slot % 16, p % 16);
  }
}

TEST(CommonMetadata, CrossAttentionWritesEncoderTokensOnce) {
  KvCacheGroup g;
  g.spec = cross_attention_spec(bf16_heads(6, 64), 64);
  g.spec.block_size = 16;
  g.kernel_block_size = 16;
  g.layer_indices = {1};
  const std::vector<int32_t> t0{4, 5, 6};  // encoder length 40
  const std::vector<int32_t> t1{8, 9};     // encoder length 20
  ScheduledRequest fresh{0, 1, t0, 40, true};
  ScheduledRequest cached{3, 1, t1, 20, false};
  const std::vector<ScheduledRequest> batch{fresh, cached};
  const CommonAttentionMetadata m = build_common_metadata(g, batch);
  EXPECT_FALSE(m.causal);
  EXPECT_EQ(m.seq_lens, (std::vector<int32_t>{40, 20}));
  EXPECT_EQ(m.encoder_seq_lens, m.seq_lens);
  EXPECT_EQ(m.query_start_loc, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(m.max_seq_len, 40);
  EXPECT_EQ(m.block_table, (std::vector<int32_t>{4, 5, 6, 8, 9, 0}));
  std::vector<int64_t> slots = iota64(4 * 16, 40);  // blocks 4, 5, 6 are consecutive
  EXPECT_EQ(m.slot_mapping, slots);
  ScheduledRequest bad = cached;
  bad.encoder_len = 0;
  EXPECT_THROW(build_common_metadata(g, std::vector<ScheduledRequest>{bad}), Error);
}

TEST(CommonMetadata, EncoderOnlyHasNoCache) {
  KvCacheGroup g;
  g.spec = encoder_only_attention_spec();
  g.layer_indices = {0, 1};
  const std::vector<ScheduledRequest> batch{{0, 7, {}}, {0, 3, {}}};
  const CommonAttentionMetadata m = build_common_metadata(g, batch);
  EXPECT_FALSE(m.causal);
  EXPECT_EQ(m.seq_lens, (std::vector<int32_t>{7, 3}));
  EXPECT_EQ(m.max_blocks_per_req, 0);
  EXPECT_TRUE(m.block_table.empty());
  EXPECT_EQ(m.slot_mapping, std::vector<int64_t>(10, -1));
  EXPECT_EQ(m.block_size, 0);
  EXPECT_THROW(build_common_metadata(g, std::vector<ScheduledRequest>{{4, 1, {}}}), Error);
}

TEST(CommonMetadata, SlidingWindowTablesCarryNullsForReleasedBlocks) {
  const FakeBackend backend("ANY16", SizeRule::any(), 16);
  const auto layers = testing::layers_with(testing::gpt_oss_20b_specs(), backend);
  KvCacheManager kv(plan_kv_cache(layers), 100);
  kv.add_request(1);
  ASSERT_TRUE(kv.allocate_slots(1, 0, 300));
  ASSERT_TRUE(kv.allocate_slots(1, 300, 1));
  const std::vector<StepRequest> batch{{1, 300, 1}};
  const auto m = build_step_metadata(kv, batch);
  ASSERT_EQ(m.size(), 2u);
  const CommonAttentionMetadata& sliding = m[0];
  EXPECT_EQ(sliding.seq_lens, (std::vector<int32_t>{301}));
  ASSERT_EQ(sliding.max_blocks_per_req, 19);
  for (int i = 0; i < 19; ++i) {
    EXPECT_EQ(sliding.block_table[static_cast<size_t>(i)] == 0, i < 10) << i;
  }
  const auto table = kv.block_table(1, 0);
  EXPECT_EQ(sliding.slot_mapping, (std::vector<int64_t>{table[18] * 16 + 300 % 16}));
  EXPECT_EQ(m[1].slot_mapping, (std::vector<int64_t>{kv.block_table(1, 1)[18] * 16 + 12}));
}

TEST(CommonMetadata, ErrorsNameTheRequest) {
  KvCacheGroup g;
  g.spec = full_attention_spec(bf16_heads(2, 64));
  g.spec.block_size = 16;
  g.kernel_block_size = 16;
  const std::vector<int32_t> table{1};
  try {
    build_common_metadata(g, std::vector<ScheduledRequest>{{0, 4, table}, {10, 10, table}});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("request 1"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("20 tokens"), std::string::npos) << e.what();
  }
  const std::vector<int32_t> released{0, 2};
  EXPECT_THROW(build_common_metadata(g, std::vector<ScheduledRequest>{{5, 1, released}}), Error);
  EXPECT_THROW(build_common_metadata(g, std::vector<ScheduledRequest>{{0, -1, table}}), Error);
}

}  // namespace
}  // namespace attnkit
