#include "attnkit/kv_cache/kv_cache_config.h"

#include <gtest/gtest.h>

#include "attnkit/kv_cache/block_size.h"
#include "kv_cache/kv_test_support.h"

namespace attnkit {
namespace {

using testing::bf16_heads;
using testing::FakeBackend;

std::string error_of(auto&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

const FakeBackend kAny16("ANY16", SizeRule::any(), 16);

// Gemma-3-1B: 22 sliding + 4 full layers with equal page sizes. Equal-size groups of
// G = 4 layers (22 >= 1.25 * 4): the full bucket is one group, the sliding bucket
// ceil(22/4) = 6 groups taking every 6th sliding layer.
TEST(KvCachePlan, Gemma3OneBillionGroups) {
  const auto layers = testing::layers_with(testing::gemma3_1b_specs(), kAny16);
  const KvCacheConfig c = plan_kv_cache(layers);
  EXPECT_EQ(c.num_buffers, 4);
  EXPECT_EQ(c.page_size_bytes, 16u * 1024);
  EXPECT_EQ(c.bytes_per_block(), 4u * 16 * 1024);
  const std::vector<std::vector<int>> expected{{0, 7, 14, 21},  {1, 8, 15, 22}, {2, 9, 16, 24},
                                               {3, 10, 18, 25}, {4, 12, 19},    {5, 11, 17, 23},
                                               {6, 13, 20}};
  ASSERT_EQ(c.groups.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const KvCacheGroup& g = c.groups[i];
    EXPECT_EQ(g.group_id, static_cast<int>(i));
    EXPECT_EQ(g.layer_indices, expected[i]) << i;
    EXPECT_EQ(g.spec.kind, i == 5 ? KvCacheKind::kFullAttention : KvCacheKind::kSlidingWindow);
    EXPECT_EQ(g.spec.block_size, 16);
    EXPECT_EQ(g.kernel_block_size, 16);
    EXPECT_EQ(g.bytes_per_token(), expected[i].size() * 1024u);
  }
  int buffer = -1;
  EXPECT_EQ(c.group_of_layer(17, &buffer).group_id, 5);
  EXPECT_EQ(buffer, 2);
  EXPECT_THROW(c.group_of_layer(26), Error);
}

TEST(KvCachePlan, GptOss20bAlternatingGroups) {
  const auto layers = testing::layers_with(testing::gpt_oss_20b_specs(), kAny16);
  const KvCacheConfig c = plan_kv_cache(layers);
  ASSERT_EQ(c.groups.size(), 2u);
  EXPECT_EQ(c.num_buffers, 12);
  EXPECT_EQ(c.groups[0].spec.kind, KvCacheKind::kSlidingWindow);
  EXPECT_EQ(c.groups[1].spec.kind, KvCacheKind::kFullAttention);
  for (int j = 0; j < 12; ++j) {
    EXPECT_EQ(c.groups[0].layer_indices[static_cast<size_t>(j)], 2 * j);
    EXPECT_EQ(c.groups[1].layer_indices[static_cast<size_t>(j)], 2 * j + 1);
  }
  EXPECT_EQ(c.groups[0].bytes_per_token(), 12u * 2048);
  EXPECT_EQ(c.page_size_bytes, 16u * 2048);
}

TEST(KvCachePlan, UniformModelsAreOneGroup) {
  const KvCacheConfig llama =
      plan_kv_cache(testing::layers_with(testing::llama31_8b_specs(), kAny16));
  ASSERT_EQ(llama.groups.size(), 1u);
  EXPECT_EQ(llama.num_buffers, 32);
  EXPECT_EQ(llama.page_size_bytes, 65536u);
  const FakeBackend mla("MLA64", SizeRule::list({64}), 64);
  const KvCacheConfig ds =
      plan_kv_cache(testing::layers_with(testing::deepseek_v2_lite_specs(), mla));
  ASSERT_EQ(ds.groups.size(), 1u);
  EXPECT_EQ(ds.groups[0].spec.kind, KvCacheKind::kMlaAttention);
  EXPECT_EQ(ds.num_buffers, 27);
  EXPECT_EQ(ds.page_size_bytes, 64u * 1152);
}

// Two groups whose backends prefer different block sizes each get their own: 16 for the
// full layers (8 heads, 4096 B/token) and 64 for the sliding layers (2 heads, 1024
// B/token). Both pages are 64 KiB, so no scaling is needed.
TEST(KvCacheBlockSize, EachGroupTakesItsBackendsPreferredSize) {
  const FakeBackend p16("P16", SizeRule::multiple(16), 16);
  const FakeBackend p64("P64", SizeRule::multiple(16), 64);
  std::vector<LayerKvInput> layers;
  for (int i = 0; i < 8; ++i) {
    if (i < 4)
      layers.push_back({i, full_attention_spec(bf16_heads(8, 128)), &p16});
    else
      layers.push_back({i, sliding_window_spec(bf16_heads(2, 128), 1024), &p64});
  }
  const KvCacheConfig c = plan_kv_cache(layers);
  ASSERT_EQ(c.groups.size(), 2u);
  EXPECT_EQ(c.groups[0].spec.block_size, 16);
  EXPECT_EQ(c.groups[0].layer_backends[0], "P16");
  EXPECT_EQ(c.groups[1].spec.block_size, 64);
  EXPECT_EQ(c.groups[1].layer_backends[0], "P64");
  EXPECT_EQ(c.groups[1].chosen_block_size, 64);
  EXPECT_EQ(c.page_size_bytes, 65536u);
}

// gpt-oss with its sliding layers on a backend whose kernels only run 16-token blocks and
// its sink layers on one preferring 64: page unification scales the sliding group to 64
// tokens, which its backend runs as 4 virtual kernel blocks of 16.
TEST(KvCacheBlockSize, UnificationScalesAndSplitsVirtually) {
  const FakeBackend k16("K16", SizeRule::list({16}), 16);
  const FakeBackend k64("K64", SizeRule::list({64}), 64);
  std::vector<LayerKvInput> layers;
  const auto specs = testing::gpt_oss_20b_specs();
  for (int i = 0; i < 24; ++i)
    layers.push_back({i, specs[static_cast<size_t>(i)], i % 2 ? &k64 : &k16});
  const KvCacheConfig c = plan_kv_cache(layers);
  ASSERT_EQ(c.groups.size(), 2u);
  const KvCacheGroup& sliding = c.groups[0];
  EXPECT_EQ(sliding.chosen_block_size, 16);
  EXPECT_EQ(sliding.spec.block_size, 64);
  EXPECT_EQ(sliding.kernel_block_size, 16);
  EXPECT_EQ(sliding.kernel_blocks_per_block(), 4);
  EXPECT_EQ(c.groups[1].spec.block_size, 64);
  EXPECT_EQ(c.groups[1].kernel_blocks_per_block(), 1);
  EXPECT_EQ(c.page_size_bytes, 64u * 2048);
  EXPECT_NE(c.describe().find("scaled"), std::string::npos) << c.describe();
}

// Pages of 6144 B (head 96) and 8192 B (head 128) at block 16 do not divide each other;
// the least common multiple 24576 B gives blocks of 64 and 48 tokens.
TEST(KvCacheBlockSize, UnificationUsesTheLeastCommonMultiple) {
  std::vector<LayerKvInput> layers{{0, full_attention_spec(bf16_heads(1, 96)), &kAny16},
                                   {1, sliding_window_spec(bf16_heads(1, 128), 256), &kAny16}};
  const KvCacheConfig c = plan_kv_cache(layers);
  EXPECT_EQ(c.page_size_bytes, 24576u);
  EXPECT_EQ(c.groups[0].spec.block_size, 64);
  EXPECT_EQ(c.groups[1].spec.block_size, 48);
  for (const KvCacheGroup& g : c.groups) EXPECT_EQ(g.spec.page_size_bytes(), c.page_size_bytes);

  std::vector<LayerKvInput> far{{0, full_attention_spec(bf16_heads(1, 509)), &kAny16},
                                {1, sliding_window_spec(bf16_heads(1, 128), 256), &kAny16}};
  const std::string e = error_of([&] { plan_kv_cache(far); });
  EXPECT_NE(e.find("cannot unify"), std::string::npos) << e;
  EXPECT_NE(e.find("8144"), std::string::npos) << e;
}

TEST(KvCacheBlockSize, UserBlockSizeWinsWhenAccepted) {
  const FakeBackend k16("K16", SizeRule::list({16}), 16);
  const auto layers = testing::layers_with(testing::gemma3_1b_specs(), k16);
  const KvCacheConfig c = plan_kv_cache(layers, 48);
  for (const KvCacheGroup& g : c.groups) {
    EXPECT_EQ(g.spec.block_size, 48);
    EXPECT_EQ(g.kernel_block_size, 16);  // 3 virtual kernel blocks per cache block
    EXPECT_TRUE(g.user_block_size);
  }
}

TEST(KvCacheBlockSize, RejectedUserBlockSizeNamesSizeBackendAndWhatItAccepts) {
  const FakeBackend fixed("FIXED", SizeRule::list({16, 32, 64}), 16);
  const auto layers = testing::layers_with(testing::llama31_8b_specs(), fixed);
  const std::string e = error_of([&] { plan_kv_cache(layers, 24); });
  EXPECT_NE(e.find("block size 24"), std::string::npos) << e;
  EXPECT_NE(e.find("FIXED"), std::string::npos) << e;
  EXPECT_NE(e.find("16, 32, 64"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { plan_kv_cache(layers, 0); }).find("out of range"), std::string::npos);
}

TEST(KvCacheBlockSize, BackendsOfOneGroupAreMadeCompatible) {
  const FakeBackend a("A", SizeRule::list({16, 32}), 16);
  const FakeBackend b("B", SizeRule::multiple(32), 32);
  const FakeBackend only16("ONLY16", SizeRule::list({16}), 16);
  const KvCacheSpec spec = full_attention_spec(bf16_heads(8, 128));
  std::vector<LayerKvInput> layers{{0, spec, &a}, {1, spec, &b}};
  const KvCacheConfig c = plan_kv_cache(layers);
  ASSERT_EQ(c.groups.size(), 1u);
  EXPECT_EQ(c.groups[0].spec.block_size, 32);
  EXPECT_EQ(c.groups[0].kernel_block_size, 32);
  EXPECT_EQ(c.groups[0].backend_names(), (std::vector<std::string>{"A", "B"}));

  // No kernel block size both can run: a clear error naming both.
  std::vector<LayerKvInput> clash{{0, spec, &only16}, {1, spec, &b}};
  const std::string e = error_of([&] { plan_kv_cache(clash); });
  EXPECT_NE(e.find("ONLY16"), std::string::npos) << e;
  EXPECT_NE(e.find("B (preferred 32"), std::string::npos) << e;
}

TEST(KvCacheBlockSize, AcceptanceRule) {
  const FakeBackend k16("K16", SizeRule::list({16}), 16);
  EXPECT_TRUE(accepts_cache_block_size(k16, 16));
  EXPECT_TRUE(accepts_cache_block_size(k16, 64));
  EXPECT_FALSE(accepts_cache_block_size(k16, 8));
  EXPECT_FALSE(accepts_cache_block_size(k16, 40));
  const AttentionBackend* both[] = {&k16, &kAny16};
  EXPECT_EQ(common_kernel_block_size(both, 64), 16);
  EXPECT_EQ(common_kernel_block_size(both, 24), std::nullopt);
}

TEST(KvCachePlan, EncoderDecoderGroups) {
  // A whisper-like model: 4 encoder layers (no cache), then 4 decoder layers each with
  // self attention and cross attention (6 heads of 64, fp32).
  const KvHeadShape h{6, 64, 64, ScalarType::kFloat32};
  std::vector<LayerKvInput> layers;
  for (int i = 0; i < 4; ++i) layers.push_back({i, encoder_only_attention_spec(), &kAny16});
  for (int i = 0; i < 4; ++i) {
    layers.push_back({4 + 2 * i, full_attention_spec(h), &kAny16});
    layers.push_back({5 + 2 * i, cross_attention_spec(h, 1500), &kAny16});
  }
  const KvCacheConfig c = plan_kv_cache(layers);
  ASSERT_EQ(c.groups.size(), 3u);
  EXPECT_FALSE(c.groups[0].has_cache());
  EXPECT_EQ(c.groups[0].layer_indices, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(c.groups[1].spec.kind, KvCacheKind::kFullAttention);
  EXPECT_EQ(c.groups[2].spec.kind, KvCacheKind::kCrossAttention);
  EXPECT_EQ(c.num_buffers, 4);
  EXPECT_EQ(c.page_size_bytes, 16u * 6 * 128 * 4);
}

TEST(KvCachePlan, BadLayersAreNamed) {
  const KvCacheSpec spec = full_attention_spec(bf16_heads(8, 128));
  std::vector<LayerKvInput> dup{{3, spec, &kAny16}, {3, spec, &kAny16}};
  EXPECT_NE(error_of([&] { plan_kv_cache(dup); }).find("layer 3 is listed twice"),
            std::string::npos);
  std::vector<LayerKvInput> none{{5, spec, nullptr}};
  EXPECT_NE(error_of([&] { plan_kv_cache(none); }).find("layer 5 has no backend"),
            std::string::npos);
}

}  // namespace
}  // namespace attnkit

namespace attnkit {
namespace {

TEST(KvCachePlan, BlocksForAMemoryBudget) {
  const KvCacheConfig c = plan_kv_cache(testing::layers_with(testing::gemma3_1b_specs(), kAny16));
  // 64 KiB per block id (4 buffers x 16 KiB).
  EXPECT_EQ(c.num_blocks_for_bytes(1u << 30), 16384);
  EXPECT_EQ(c.num_blocks_for_bytes(65535), 0);
  EXPECT_EQ(c.num_blocks_for_bytes(65536 * 3 + 10), 3);
}

// An encoder-only model (BERT) has no cache at all: no buffers, no blocks per request,
// and its metadata is still built.
TEST(KvCachePlan, EncoderOnlyModelNeedsNoMemory) {
  const std::vector<KvCacheSpec> specs(12, encoder_only_attention_spec());
  const KvCacheConfig c = plan_kv_cache(testing::layers_with(specs, kAny16));
  ASSERT_EQ(c.groups.size(), 1u);
  EXPECT_EQ(c.num_buffers, 0);
  EXPECT_EQ(c.page_size_bytes, 0u);
  EXPECT_EQ(c.bytes_per_block(), 0u);
  EXPECT_EQ(c.num_blocks_for_bytes(1u << 30), 0);
  EXPECT_NE(c.describe().find("no cache"), std::string::npos) << c.describe();
}

}  // namespace
}  // namespace attnkit
