#include "attnkit/kv_cache/spec_factory.h"

#include <gtest/gtest.h>

#include "kv_cache/kv_test_support.h"

namespace attnkit {
namespace {

using testing::bf16_heads;

// Page sizes below are worked out by hand: block x heads x (K + V head size) x 2 bytes.
TEST(KvSpecPageSize, Gemma3OneBillionSlidingAndFull) {
  for (const KvCacheSpec& spec : testing::gemma3_1b_specs()) {
    KvCacheSpec s = spec;
    s.block_size = 16;
    EXPECT_EQ(s.bytes_per_token(), 1u * (256 + 256) * 2);  // 1024
    EXPECT_EQ(s.page_size_bytes(), 16u * 1024);
  }
  const auto specs = testing::gemma3_1b_specs();
  int full = 0;
  for (const auto& s : specs) full += s.kind == KvCacheKind::kFullAttention;
  EXPECT_EQ(full, 4);
  EXPECT_EQ(specs[0].sliding_window, 512);
}

TEST(KvSpecPageSize, Llama31EightBillion) {
  KvCacheSpec s = testing::llama31_8b_specs()[0];
  s.block_size = 16;
  EXPECT_EQ(s.bytes_per_token(), 8u * (128 + 128) * 2);  // 4096
  EXPECT_EQ(s.page_size_bytes(), 65536u);
}

TEST(KvSpecPageSize, DeepSeekV2LiteMlaLatentIs576Wide) {
  KvCacheSpec s = testing::deepseek_v2_lite_specs()[0];
  EXPECT_EQ(s.kind, KvCacheKind::kMlaAttention);
  EXPECT_EQ(s.num_kv_heads, 1);
  EXPECT_EQ(s.head_size, 576);
  EXPECT_EQ(s.head_size_v, 0);
  s.block_size = 64;
  EXPECT_EQ(s.bytes_per_token(), 576u * 2);
  EXPECT_EQ(s.page_size_bytes(), 64u * 1152);  // 73728
}

TEST(KvSpecPageSize, GptOss20bSlidingAndFull) {
  const auto specs = testing::gpt_oss_20b_specs();
  EXPECT_EQ(specs[0].kind, KvCacheKind::kSlidingWindow);
  EXPECT_EQ(specs[1].kind, KvCacheKind::kFullAttention);
  for (KvCacheSpec s : specs) {
    s.block_size = 16;
    EXPECT_EQ(s.bytes_per_token(), 8u * (64 + 64) * 2);  // 2048
    EXPECT_EQ(s.page_size_bytes(), 32768u);
  }
}

TEST(KvSpecPageSize, SeparateKAndVHeadSizes) {
  KvCacheSpec s = full_attention_spec(KvHeadShape{4, 192, 128, ScalarType::kFloat16});
  s.block_size = 32;
  EXPECT_EQ(s.bytes_per_token(), 4u * (192 + 128) * 2);
  EXPECT_EQ(s.page_size_bytes(), 32u * 2560);
  s.dtype = ScalarType::kFp8E4M3;
  EXPECT_EQ(s.page_size_bytes(), 32u * 1280);
}

TEST(KvSpecKinds, EveryKindFromItsConstructor) {
  const KvHeadShape h = bf16_heads(2, 64);
  EXPECT_EQ(chunked_local_attention_spec(h, 8192).chunk_size, 8192);
  EXPECT_EQ(cross_attention_spec(h, 1500).max_encoder_len, 1500);
  const KvCacheSpec swmla = sliding_window_mla_spec(512, 64, ScalarType::kBFloat16, 1024);
  EXPECT_EQ(swmla.kind, KvCacheKind::kSlidingWindowMla);
  EXPECT_EQ(swmla.sliding_window, 1024);
  const KvCacheSpec enc = encoder_only_attention_spec();
  EXPECT_FALSE(enc.has_cache());
  EXPECT_EQ(enc.bytes_per_token(), 0u);
  EXPECT_EQ(enc.page_size_bytes(), 0u);
}

TEST(KvSpecKinds, SpecForLayerFollowsKindOf) {
  SelectorConfig c;
  c.head_size = c.head_size_v = 256;
  c.num_kv_heads = 1;
  c.sliding_window = 512;
  KvCacheSpec s = spec_for_layer(c);
  EXPECT_EQ(s, sliding_window_spec(bf16_heads(1, 256), 512));

  c.sliding_window.reset();
  c.has_sinks = true;  // learned sink logits: the cache of full attention
  EXPECT_EQ(spec_for_layer(c), full_attention_spec(bf16_heads(1, 256)));
  c.sink_len = 4;  // static sink tokens: sink_full_attention, carrying its sink_len
  EXPECT_EQ(spec_for_layer(c).kind, KvCacheKind::kSinkFullAttention);
  EXPECT_EQ(spec_for_layer(c).sink_len, 4);
  c.sink_len = 0;

  SelectorConfig state;
  state.state = StateLayerDims{};
  state.state->type = StateLayerType::kLinearAttention;
  state.state->num_heads = 4;
  state.state->head_dim = 32;
  const KvCacheSpec ss = spec_for_layer(state);
  EXPECT_EQ(ss.kind, KvCacheKind::kMamba);
  EXPECT_EQ(ss.bytes_per_token(), 0u);
  EXPECT_EQ(ss.state_bytes(), 4u * 32 * 32 * 4);  // [4][32][32] float32, no conv state
  state.state->num_heads = 0;
  EXPECT_THROW(spec_for_layer(state), Error);

  SelectorConfig mla;
  mla.use_mla = true;
  mla.head_size = 576;
  mla.head_size_v = 512;
  mla.mla_rope_dim = 64;
  mla.num_kv_heads = 1;
  mla.kv_cache_dtype = KvCacheDType::kFp8E4M3;
  const KvCacheSpec m = spec_for_layer(mla);
  EXPECT_EQ(m, mla_spec(512, 64, ScalarType::kFp8E4M3));
  EXPECT_EQ(m.bytes_per_token(), 576u);

  SelectorConfig enc;
  enc.attn_type = AttentionType::kEncoderOnly;
  EXPECT_FALSE(spec_for_layer(enc).has_cache());

  SelectorConfig cross;
  cross.attn_type = AttentionType::kEncoderDecoder;
  cross.num_kv_heads = 6;
  cross.head_size = cross.head_size_v = 64;
  cross.dtype = DType::kFloat32;
  const KvCacheSpec x = spec_for_layer(cross, 1500);
  EXPECT_EQ(x.kind, KvCacheKind::kCrossAttention);
  EXPECT_EQ(x.dtype, ScalarType::kFloat32);
  EXPECT_EQ(x.max_encoder_len, 1500);
}

TEST(KvSpecKinds, BadValuesAreNamed) {
  auto message_of = [](auto&& fn) -> std::string {
    try {
      fn();
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(message_of([] { sliding_window_spec(bf16_heads(1, 64), 0); }).find("sliding_window"),
            std::string::npos);
  EXPECT_NE(message_of([] { full_attention_spec(bf16_heads(0, 64)); }).find("num_kv_heads"),
            std::string::npos);
  SelectorConfig cross;
  cross.attn_type = AttentionType::kEncoderDecoder;
  cross.num_kv_heads = 6;
  EXPECT_NE(message_of([&] { spec_for_layer(cross); }).find("max_encoder_len"), std::string::npos);
  SelectorConfig chunk;
  chunk.num_kv_heads = 8;
  chunk.chunk_size = -4;
  EXPECT_NE(message_of([&] { spec_for_layer(chunk); }).find("-4"), std::string::npos);
}

}  // namespace
}  // namespace attnkit
