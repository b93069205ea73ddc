// State layers (kind mamba) in the shared block pool: page sizes, groups, one block per
// request in the manager, the state views, the metadata and the memory report.

#include <gtest/gtest.h>

#include "attnkit/kv_cache/block_size.h"
#include "attnkit/kv_cache/common_metadata_builder.h"
#include "attnkit/kv_cache/kv_cache_config.h"
#include "attnkit/kv_cache/kv_cache_manager.h"
#include "attnkit/kv_cache/kv_cache_storage.h"
#include "attnkit/kv_cache/kv_memory_report.h"
#include "attnkit/kv_cache/spec_factory.h"
#include "kv_cache/kv_test_support.h"

namespace attnkit {
namespace {

using testing::bf16_heads;
using testing::FakeBackend;

const FakeBackend kMultiple16("M16", SizeRule::multiple(16), 16);

// Qwen3-Next's gated delta net: conv 8192 x 3 and state 32 x 128 x 128, float32:
// 98304 + 2097152 = 2195456 bytes per request.
StateLayerDims qwen3_next_gdn() {
  StateLayerDims d;
  d.type = StateLayerType::kGatedDeltaNet;
  d.num_k_heads = 16, d.head_k_dim = 128, d.num_heads = 32, d.head_dim = 128, d.conv_kernel = 4;
  return d;
}

// 12 full-attention layers (2 KV heads x 256, bf16: 2048 B per token) and 36 GDN layers,
// every fourth layer full, as Qwen3-Next-80B.
std::vector<LayerKvInput> qwen3_next_layers() {
  std::vector<LayerKvInput> layers;
  for (int i = 0; i < 48; ++i) {
    const KvCacheSpec spec =
        (i + 1) % 4 == 0 ? full_attention_spec(bf16_heads(2, 256)) : state_spec(qwen3_next_gdn());
    layers.push_back({i, spec, &kMultiple16});
  }
  return layers;
}

TEST(StateCachePlan, AttentionBlocksGrowUntilAPageHoldsAState) {
  ASSERT_EQ(qwen3_next_gdn().bytes(), 2195456u);
  const KvCacheConfig c = plan_kv_cache(qwen3_next_layers());
  // 2195456 / (16 x 2048) = 66.99: 67 x 16 = 1072 tokens per block, 2195456 B per page.
  ASSERT_EQ(c.groups.size(), 4u);  // G = 12: one full group, three GDN groups
  EXPECT_EQ(c.num_buffers, 12);
  EXPECT_EQ(c.page_size_bytes, 1072u * 2048u);
  int state_groups = 0;
  for (const KvCacheGroup& g : c.groups) {
    EXPECT_EQ(g.layer_indices.size(), 12u);
    if (g.spec.is_state()) {
      ++state_groups;
      EXPECT_EQ(g.spec.state_bytes(), 2195456u);
      EXPECT_EQ(g.cache_block_size(), 1);
    } else {
      EXPECT_EQ(g.spec.kind, KvCacheKind::kFullAttention);
      EXPECT_EQ(g.cache_block_size(), 1072);
      EXPECT_EQ(g.kernel_block_size, 1072);
      EXPECT_EQ(g.chosen_block_size, 16);
      EXPECT_EQ(g.spec.page_size_bytes(), c.page_size_bytes);
    }
  }
  EXPECT_EQ(state_groups, 3);
  // The GDN groups take layers i, i+3k.. of their bucket: group 0 holds 0, 4, 8, ...
  EXPECT_EQ(c.groups[0].layer_indices.front(), 0);
  EXPECT_EQ(c.groups[0].layer_indices[1], 4);
}

TEST(StateCachePlan, AModelOfStatesOnlyHasAPageOfItsLargestStateRoundedTo16) {
  StateLayerDims small;
  small.type = StateLayerType::kShortConv;
  small.inner_size = 5, small.conv_kernel = 3;  // 5 x 2 floats = 40 B
  StateLayerDims large = small;
  large.inner_size = 9;  // 72 B
  const std::vector<LayerKvInput> layers = {{0, state_spec(small), &kMultiple16},
                                            {1, state_spec(large), &kMultiple16}};
  const KvCacheConfig c = plan_kv_cache(layers);
  EXPECT_EQ(c.page_size_bytes, 80u);
  EXPECT_EQ(c.groups.size(), 2u);
}

TEST(StateCachePlan, AStateTooLargeForAnyAttentionBlockIsRefusedNamingTheSizes) {
  StateLayerDims huge;
  huge.type = StateLayerType::kLinearAttention;
  huge.num_heads = 1024, huge.head_dim = 256;  // 256 MiB per request
  const std::vector<LayerKvInput> layers = {
      {0, state_spec(huge), &kMultiple16},
      {1, full_attention_spec(bf16_heads(1, 64)), &kMultiple16}};
  try {
    plan_kv_cache(layers);
    FAIL() << "a 256 MiB state was planned";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot hold a 268435456 B recurrent state in one cache "
                                         "page: full_attention layers 1 (256 B per token) would "
                                         "need block size 1048576 (> 65536)"),
              std::string::npos)
        << e.what();
  }
}

TEST(StateCacheManager, ARequestTakesOneStateBlockAtItsFirstStepAndKeepsIt) {
  const KvCacheConfig c = plan_kv_cache(qwen3_next_layers());
  KvCacheManager kv(c, 16);
  kv.add_request(7);
  // One block in each of the three GDN groups and one 1072-token block of full attention.
  EXPECT_EQ(kv.num_blocks_needed(7, 0, 100), 4);
  ASSERT_TRUE(kv.allocate_slots(7, 0, 100).ok);
  EXPECT_EQ(kv.num_blocks_needed(7, 100, 900), 0);   // 1000 tokens: inside the first block
  EXPECT_EQ(kv.num_blocks_needed(7, 100, 1000), 1);  // 1100 tokens: a second attention block
  ASSERT_TRUE(kv.allocate_slots(7, 100, 1000).ok);
  for (const KvCacheGroup& g : c.groups) {
    EXPECT_EQ(kv.block_table(7, g.group_id).size(), g.spec.is_state() ? 1u : 2u);
  }
  EXPECT_EQ(kv.min_blocks_alone(1100), 3 + 2);
  EXPECT_EQ(kv.check_invariants(), "");
  kv.free_request(7);
  EXPECT_EQ(kv.num_free_blocks(), 15);
}

TEST(StateCacheMetadata, OneStateBlockPerRequestAndNoSlots) {
  const KvCacheConfig c = plan_kv_cache(qwen3_next_layers());
  KvCacheManager kv(c, 16);
  kv.add_request(1);
  kv.add_request(2);
  ASSERT_TRUE(kv.allocate_slots(1, 0, 5).ok);
  ASSERT_TRUE(kv.allocate_slots(2, 0, 3).ok);
  const auto m =
      build_step_metadata(kv, std::vector<StepRequest>{{1, 0, 5, false}, {2, 0, 3, false}});
  const CommonAttentionMetadata& s = m.at(0);  // a GDN group
  EXPECT_EQ(s.block_size, 1);
  EXPECT_EQ(s.max_blocks_per_req, 1);
  EXPECT_EQ(s.block_table,
            (std::vector<int32_t>{kv.block_table(1, 0)[0], kv.block_table(2, 0)[0]}));
  EXPECT_EQ(s.slot_mapping, std::vector<int64_t>(8, -1));
  EXPECT_EQ(s.seq_lens, (std::vector<int32_t>{5, 3}));
  // A state group without its block is an error naming the request.
  const KvCacheGroup& g = c.groups[0];
  const std::vector<ScheduledRequest> batch = {{0, 2, {}, 0, false}};
  try {
    build_common_metadata(g, batch);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("request 0 of the batch: state group 0 needs exactly "
                                         "one allocated state block"),
              std::string::npos)
        << e.what();
  }
  // A mamba group whose spec lost its state dimensions is refused, whatever its tables.
  KvCacheGroup no_dims = g;
  no_dims.spec.state.reset();
  const std::vector<int32_t> table = {kv.block_table(1, 0)[0]};
  const std::vector<ScheduledRequest> one = {{0, 2, table, 0, false}};
  try {
    build_common_metadata(no_dims, one);
    FAIL() << "a state group without dimensions was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("group 0 is a mamba (state) group without state "
                                         "dimensions"),
              std::string::npos)
        << e.what();
  }
}

TEST(StateCacheStorage, ViewsPutTheConvStateFirstAndTheAlignedRecurrentStateAfter) {
  StateLayerDims d;
  d.type = StateLayerType::kMamba2;
  d.num_heads = 2, d.head_dim = 4, d.n_groups = 1, d.state_size = 3, d.conv_kernel = 4;
  // conv (8 + 6) x 3 floats = 168 B, rounded to 176; state 2 x 4 x 3 floats = 96 B.
  EXPECT_EQ(d.recurrent_offset(), 176u);
  EXPECT_EQ(d.bytes(), 272u);
  const KvCacheSpec spec = state_spec(d);
  const std::vector<LayerKvInput> layers = {{0, spec, &kMultiple16}};
  const KvCacheConfig c = plan_kv_cache(layers);
  KvCacheStorage storage(c, 3);
  const KvCacheTensors& t = storage.tensors(0);
  EXPECT_EQ(t.block_size, 1);
  EXPECT_EQ(t.key.ndim, 3);
  EXPECT_EQ(t.key.size(1), 14);
  EXPECT_EQ(t.key.size(2), 3);
  EXPECT_EQ(t.key.stride(0), 272 / 4);
  EXPECT_EQ(t.value.ndim, 4);
  EXPECT_EQ(t.value.stride(0), 272 / 4);
  EXPECT_EQ(static_cast<char*>(t.value.data) - static_cast<char*>(t.key.data), 176);
}

TEST(StateMemoryReport, StatesCountOncePerRequestWhateverTheContext) {
  const KvCacheConfig c = plan_kv_cache(qwen3_next_layers());
  const KvMemoryReport r = kv_memory_report(c, 100000);
  size_t states = 0;
  for (const KvGroupMemory& g : r.groups) states += g.state_bytes;
  EXPECT_EQ(states, 36u * 2195456u);
  // 12 full layers x 2048 B x 100000 tokens, rounded up to whole 1072-token blocks.
  const size_t full = 12u * 2048u * 94u * 1072u;
  EXPECT_EQ(r.bytes_held, states + full);
  EXPECT_NE(r.to_text().find("recurrent state per request"), std::string::npos) << r.to_text();
}

}  // namespace
}  // namespace attnkit
