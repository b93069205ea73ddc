#include "attnkit/kv_cache/kv_memory_report.h"

#include <gtest/gtest.h>

#include "kv_cache/kv_test_support.h"

namespace attnkit {
namespace {

const testing::FakeBackend kAny16("ANY16", SizeRule::any(), 16);

// Worked by hand: at 8192 tokens the full group (4 layers x 1024 B) holds all 8192
// tokens = 32 MiB; each sliding layer holds the blocks of positions 7681..8191 = blocks
// 480..511 = 512 tokens, 22 layers x 1024 B x 512 = 11 MiB. Baseline: 26 x 1024 x 8192.
TEST(KvMemoryReport, Gemma3OneBillionSavesTheWindow) {
  const KvCacheConfig c = plan_kv_cache(testing::layers_with(testing::gemma3_1b_specs(), kAny16));
  const KvMemoryReport r = kv_memory_report(c, 8192);
  ASSERT_EQ(r.groups.size(), 7u);
  EXPECT_EQ(r.bytes_per_token, 26u * 1024);
  const KvGroupMemory& full = r.groups[5];
  EXPECT_EQ(full.num_layers, 4);
  EXPECT_EQ(full.bytes_per_token, 4096u);
  EXPECT_EQ(full.tokens_held, 8192);
  EXPECT_EQ(full.bytes_held, 33554432u);
  EXPECT_EQ(r.groups[0].blocks_held, 32);
  EXPECT_EQ(r.groups[0].tokens_held, 512);
  EXPECT_EQ(r.groups[4].bytes_held, 512u * 3 * 1024);
  EXPECT_EQ(r.bytes_held, 33554432u + 11534336u);
  EXPECT_EQ(r.full_attention_bytes, 218103808u);
  EXPECT_NEAR(r.saving(), 1.0 - 45088768.0 / 218103808.0, 1e-12);
  // Pool cost: 512 + 6 x 32 blocks of 4 x 16 KiB; the two 3-layer groups pad one buffer.
  EXPECT_EQ(r.pool_bytes_held, 704u * 65536);
  EXPECT_EQ(r.pool_bytes_held - r.bytes_held, 2u * 32 * 16384);
  EXPECT_NE(r.to_text().find("saving 79.3%"), std::string::npos) << r.to_text();
}

TEST(KvMemoryReport, GptOssAndLlama) {
  const KvCacheConfig oss =
      plan_kv_cache(testing::layers_with(testing::gpt_oss_20b_specs(), kAny16));
  const KvMemoryReport r = kv_memory_report(oss, 8192);
  EXPECT_EQ(r.bytes_per_token, 24u * 2048);
  EXPECT_EQ(r.groups[0].tokens_held, 128);  // window 128: blocks 504..511
  EXPECT_EQ(r.bytes_held, 128u * 24576 + 8192u * 24576);
  EXPECT_EQ(r.full_attention_bytes, 24u * 2048 * 8192);
  EXPECT_NEAR(r.saving(), 1.0 - (128.0 + 8192.0) / (2 * 8192.0), 1e-12);

  const KvCacheConfig llama =
      plan_kv_cache(testing::layers_with(testing::llama31_8b_specs(), kAny16));
  const KvMemoryReport l = kv_memory_report(llama, 1000);
  EXPECT_EQ(l.bytes_per_token, 131072u);
  EXPECT_EQ(l.bytes_held, 1008u * 131072);  // 63 blocks of 16
  EXPECT_EQ(l.saving(), 0.0);
  EXPECT_THROW(kv_memory_report(llama, -1), Error);
}

TEST(KvMemoryReport, ShortContextsSaveNothingAndChunksReset) {
  const KvCacheConfig gemma =
      plan_kv_cache(testing::layers_with(testing::gemma3_1b_specs(), kAny16));
  EXPECT_EQ(kv_memory_report(gemma, 100).saving(), 0.0);
  EXPECT_EQ(kv_memory_report(gemma, 0).bytes_held, 0u);

  KvCacheGroup chunked;
  chunked.spec = chunked_local_attention_spec(testing::bf16_heads(8, 128), 8192);
  chunked.spec.block_size = 16;
  chunked.layer_indices = {0};
  EXPECT_EQ(blocks_held(chunked, 8192), 0);       // a new chunk starts at 8192
  EXPECT_EQ(blocks_held(chunked, 8192 + 17), 2);  // positions 8192..8208
  EXPECT_EQ(blocks_held(chunked, 8000), 500);
}

}  // namespace
}  // namespace attnkit
