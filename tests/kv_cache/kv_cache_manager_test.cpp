#include "attnkit/kv_cache/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <random>

#include "kv_cache/kv_test_support.h"

namespace attnkit {
namespace {

using testing::bf16_heads;
using testing::FakeBackend;

const FakeBackend& any16() {
  static const FakeBackend b("ANY16", SizeRule::any(), 16);
  return b;
}

KvCacheConfig plan(const std::vector<KvCacheSpec>& specs, std::optional<int> block = {}) {
  const auto layers = testing::layers_with(specs, any16());
  return plan_kv_cache(layers, block);
}

int live_entries(std::span<const int32_t> table) {
  return static_cast<int>(std::count_if(table.begin(), table.end(),
                                        [](int32_t b) { return b != BlockPool::kNullBlock; }));
}

TEST(KvCacheManager, BlockTablesGrowWithTokens) {
  KvCacheManager kv(plan(testing::llama31_8b_specs()), 20);
  kv.add_request(7);
  ASSERT_TRUE(kv.allocate_slots(7, 0, 17));  // 17 tokens -> 2 blocks of 16
  EXPECT_EQ(kv.block_table(7, 0).size(), 2u);
  ASSERT_TRUE(kv.allocate_slots(7, 17, 15));  // 32 tokens: still 2
  EXPECT_EQ(kv.block_table(7, 0).size(), 2u);
  ASSERT_TRUE(kv.allocate_slots(7, 32, 1));
  EXPECT_EQ(kv.block_table(7, 0).size(), 3u);
  EXPECT_EQ(kv.num_tokens(7), 33);
  EXPECT_EQ(kv.num_free_blocks(), 19 - 3);
  EXPECT_EQ(kv.check_invariants(), "");
  kv.free_request(7);
  EXPECT_EQ(kv.num_free_blocks(), 19);
  EXPECT_FALSE(kv.has_request(7));
}

TEST(KvCacheManager, SlidingWindowReleasesBlocksWhollyOutsideTheWindow) {
  // gpt-oss: group 0 sliding window 128, group 1 sink full; block size 16.
  KvCacheManager kv(plan(testing::gpt_oss_20b_specs()), 200);
  ASSERT_EQ(kv.config().groups[0].spec.kind, KvCacheKind::kSlidingWindow);
  kv.add_request(1);
  ASSERT_TRUE(kv.allocate_slots(1, 0, 300));  // positions 0..299: 19 blocks each
  EXPECT_EQ(live_entries(kv.block_table(1, 0)), 19);
  // Decoding position 300 needs keys 173..300: blocks 0..9 end at or before 160 <= 173.
  ASSERT_TRUE(kv.allocate_slots(1, 300, 1));
  auto sliding = kv.block_table(1, 0);
  ASSERT_EQ(sliding.size(), 19u);
  for (int i = 0; i < 19; ++i) {
    EXPECT_EQ(sliding[static_cast<size_t>(i)] == BlockPool::kNullBlock, i < 10) << i;
  }
  EXPECT_EQ(live_entries(kv.block_table(1, 1)), 19);  // full attention keeps everything
  EXPECT_EQ(kv.num_free_blocks(), 199 - 9 - 19);
  EXPECT_EQ(kv.check_invariants(), "");
  // A step that needs released positions is refused, not served from the null block.
  EXPECT_THROW((void)kv.allocate_slots(1, 100, 1), Error);
  kv.free_request(1);
  EXPECT_EQ(kv.num_free_blocks(), 199);
}

// What the scheduler refuses a request by at admission: the blocks its last step holds
// alone. gpt-oss at 301 tokens: the full group keeps all 19 blocks, the 128-token window
// only blocks 10..18 (the same 9 + 19 the allocation above leaves live).
TEST(KvCacheManager, MinBlocksAloneIsWhatTheLastStepHolds) {
  const KvCacheManager gpt_oss(plan(testing::gpt_oss_20b_specs()), 200);
  EXPECT_EQ(gpt_oss.min_blocks_alone(301), 9 + 19);
  EXPECT_EQ(gpt_oss.min_blocks_alone(16), 1 + 1);
  EXPECT_EQ(gpt_oss.min_blocks_alone(0), 0);
  const KvCacheManager llama(plan(testing::llama31_8b_specs()), 20);
  EXPECT_EQ(llama.min_blocks_alone(17), 2);
  // No overflow at the largest counts.
  EXPECT_EQ(llama.min_blocks_alone(std::numeric_limits<int>::max()), (1 << 27));
}

TEST(KvCacheManager, ChunkedLocalReleasesPreviousChunks) {
  std::vector<KvCacheSpec> specs{chunked_local_attention_spec(bf16_heads(8, 128), 64),
                                 full_attention_spec(bf16_heads(8, 128))};
  KvCacheManager kv(plan(specs), 64);
  kv.add_request(3);
  ASSERT_TRUE(kv.allocate_slots(3, 0, 130));
  ASSERT_TRUE(kv.allocate_slots(3, 130, 1));  // chunk of position 130 starts at 128
  auto local = kv.block_table(3, 0);
  ASSERT_EQ(local.size(), 9u);
  for (int i = 0; i < 9; ++i) EXPECT_EQ(local[static_cast<size_t>(i)] == 0, i < 8) << i;
  EXPECT_EQ(kv.check_invariants(), "");
}

TEST(KvCacheManager, OutOfBlocksIsRecoverable) {
  KvCacheManager kv(plan(testing::llama31_8b_specs()), 6);  // 5 usable blocks
  kv.add_request(1);
  kv.add_request(2);
  ASSERT_TRUE(kv.allocate_slots(1, 0, 48));  // 3 blocks
  EXPECT_EQ(kv.num_blocks_needed(2, 0, 48), 3);
  const AllocationStatus s = kv.allocate_slots(2, 0, 48);
  EXPECT_FALSE(s);
  EXPECT_EQ(s.blocks_needed, 3);
  EXPECT_EQ(s.blocks_free, 2);
  EXPECT_NE(s.message().find("need 3, 2 free"), std::string::npos) << s.message();
  // Nothing changed for request 2; request 1 is intact.
  EXPECT_TRUE(kv.block_table(2, 0).empty());
  EXPECT_EQ(kv.num_tokens(2), 0);
  EXPECT_EQ(kv.block_table(1, 0).size(), 3u);
  EXPECT_EQ(kv.check_invariants(), "");
  // Preempt request 1, then request 2 fits.
  kv.free_request(1);
  EXPECT_TRUE(kv.allocate_slots(2, 0, 48));
  EXPECT_EQ(kv.check_invariants(), "");
}

TEST(KvCacheManager, CrossAttentionIsSizedByTheEncoderOnce) {
  std::vector<KvCacheSpec> specs{full_attention_spec(bf16_heads(6, 64)),
                                 cross_attention_spec(bf16_heads(6, 64), 1500),
                                 encoder_only_attention_spec()};
  KvCacheManager kv(plan(specs), 300);
  EXPECT_THROW(kv.add_request(1), Error);        // no encoder length
  EXPECT_THROW(kv.add_request(1, 1501), Error);  // too long
  kv.add_request(1, 1500);
  EXPECT_EQ(kv.num_blocks_needed(1, 0, 4), 1 + 94);
  ASSERT_TRUE(kv.allocate_slots(1, 0, 4));
  const KvCacheConfig& c = kv.config();
  for (const KvCacheGroup& g : c.groups) {
    const size_t size = kv.block_table(1, g.group_id).size();
    const size_t expected = g.spec.kind == KvCacheKind::kCrossAttention  ? 94u  // ceil(1500/16)
                            : g.spec.kind == KvCacheKind::kFullAttention ? 1u
                                                                         : 0u;
    EXPECT_EQ(size, expected) << g.spec.describe();
  }
  ASSERT_TRUE(kv.allocate_slots(1, 4, 20));
  EXPECT_EQ(kv.block_table(1, 1).size(), 94u);  // written once, never grows
  kv.free_request(1);
  EXPECT_EQ(kv.num_free_blocks(), 299);
}

TEST(KvCacheManager, MisuseIsAnError) {
  KvCacheManager kv(plan(testing::llama31_8b_specs()), 8);
  EXPECT_THROW((void)kv.allocate_slots(9, 0, 1), Error);
  EXPECT_THROW(kv.free_request(9), Error);
  kv.add_request(9);
  EXPECT_THROW(kv.add_request(9), Error);
  EXPECT_THROW((void)kv.allocate_slots(9, 5, 1), Error);  // computed tokens without slots
  EXPECT_THROW((void)kv.allocate_slots(9, 0, -1), Error);
  EXPECT_THROW((void)kv.block_table(9, 3), Error);
}

// Random workloads over a hybrid model (sliding + full + chunked): requests arrive,
// prefill in chunks, decode, hit out-of-memory (and get preempted), finish. After every
// operation the pool and the tables must agree: no leak, no block in two places, free
// count consistent; at the end every block is back.
TEST(KvCacheManager, RandomWorkloadsKeepPoolInvariants) {
  std::vector<KvCacheSpec> specs;
  for (int i = 0; i < 6; ++i) {
    specs.push_back(i % 3 == 0   ? full_attention_spec(bf16_heads(2, 64))
                    : i % 3 == 1 ? sliding_window_spec(bf16_heads(2, 64), 40)
                                 : chunked_local_attention_spec(bf16_heads(2, 64), 48));
  }
  for (uint32_t seed : {1u, 2u, 3u, 4u}) {
    std::mt19937 rng(seed);
    KvCacheManager kv(plan(specs, 8), 120);
    const int usable = kv.pool().num_usable_blocks();
    std::map<RequestId, int> computed;  // request -> computed tokens
    RequestId next_id = 0;
    int ooms = 0;
    for (int step = 0; step < 1500; ++step) {
      const int op = static_cast<int>(rng() % 10);
      if (op < 2 || computed.empty()) {
        kv.add_request(next_id);
        computed[next_id++] = 0;
      } else if (op < 9) {
        auto it = computed.begin();
        std::advance(it, static_cast<long>(rng() % computed.size()));
        const int n = rng() % 4 == 0 ? 1 + static_cast<int>(rng() % 70) : 1;
        const int free_before = kv.num_free_blocks();
        const int needed = kv.num_blocks_needed(it->first, it->second, n);
        const AllocationStatus s = kv.allocate_slots(it->first, it->second, n);
        if (s) {
          it->second += n;
          EXPECT_LE(needed, free_before);
          // needed is net of the step's own releases, clamped at 0.
          if (needed > 0) {
            EXPECT_EQ(kv.num_free_blocks(), free_before - needed);
          } else {
            EXPECT_GE(kv.num_free_blocks(), free_before);
          }
        } else {
          ++ooms;
          EXPECT_GT(needed, free_before);
          EXPECT_GT(s.blocks_needed, s.blocks_free);
          kv.free_request(it->first);  // preempt
          computed.erase(it);
        }
      } else {
        auto it = computed.begin();
        std::advance(it, static_cast<long>(rng() % computed.size()));
        kv.free_request(it->first);
        computed.erase(it);
      }
      ASSERT_EQ(kv.check_invariants(), "") << "seed " << seed << " step " << step;
      int held = 0;
      for (const auto& [id, c] : computed) {
        for (const KvCacheGroup& g : kv.config().groups)
          held += live_entries(kv.block_table(id, g.group_id));
      }
      ASSERT_EQ(held, usable - kv.num_free_blocks()) << "seed " << seed << " step " << step;
    }
    EXPECT_GT(ooms, 0) << "the workload should exercise out-of-memory";
    for (const auto& [id, c] : computed) kv.free_request(id);
    EXPECT_EQ(kv.num_free_blocks(), usable);
    EXPECT_EQ(kv.check_invariants(), "");
  }
}

}  // namespace
}  // namespace attnkit

namespace attnkit {
namespace {

TEST(KvCacheManager, EncoderOnlyRequestsHoldNothing) {
  const std::vector<KvCacheSpec> specs(12, encoder_only_attention_spec());
  KvCacheManager kv(plan(specs), 2);
  kv.add_request(4);
  EXPECT_EQ(kv.num_blocks_needed(4, 0, 512), 0);
  ASSERT_TRUE(kv.allocate_slots(4, 0, 512));
  EXPECT_TRUE(kv.block_table(4, 0).empty());
  EXPECT_EQ(kv.num_free_blocks(), 1);
  kv.free_request(4);
  EXPECT_EQ(kv.check_invariants(), "");
}

}  // namespace
}  // namespace attnkit
