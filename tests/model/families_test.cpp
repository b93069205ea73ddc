// Family rules on configs written inline: Qwen2/Qwen3 sliding layers, Gemma-2 soft-cap and
// scale, Phi-3, Cohere2, Llama-4 NoPE lists, BART and T5 stacks, explicit layer_types,
// hybrid models and unknown model types.

#include <gtest/gtest.h>

#include <cmath>

#include "attnkit/core/error.h"
#include "attnkit/selector/layer_config.h"
#include "model_test_util.h"

namespace attnkit {
namespace {

using testing::every;
using testing::layers_of_kind;
using testing::parse_inline;
using testing::range;

TEST(Families, Qwen2SlidesFromMaxWindowLayersWhenEnabled) {
  const ModelDescription m = parse_inline(R"({
    "model_type": "qwen2", "num_hidden_layers": 6, "hidden_size": 3584,
    "num_attention_heads": 28, "num_key_value_heads": 4, "use_sliding_window": true,
    "sliding_window": 4096, "max_window_layers": 4})");
  ASSERT_EQ(m.layers.size(), 6u);
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kFullAttention), range(0, 4));
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kSlidingWindow), range(4, 6));
  EXPECT_EQ(m.layers[5].sliding_window, 4096);
  EXPECT_EQ(m.layers[0].head_size, 128);  // 3584 / 28
  EXPECT_EQ(m.layers[0].num_kv_heads, 4);
  EXPECT_TRUE(m.warnings.empty());
}

TEST(Families, Qwen2IgnoresSlidingWindowUnlessEnabled) {
  const ModelDescription m = parse_inline(R"({
    "model_type": "qwen2", "num_hidden_layers": 4, "hidden_size": 896,
    "num_attention_heads": 14, "num_key_value_heads": 2, "use_sliding_window": false,
    "sliding_window": 32768, "max_window_layers": 2})");
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kFullAttention), range(0, 4));
  EXPECT_EQ(m.layers[0].head_size, 64);  // 896 / 14
}

TEST(Families, Qwen3UsesExplicitHeadDimOverHiddenSize) {
  const ModelDescription m = parse_inline(R"({
    "model_type": "qwen3", "num_hidden_layers": 3, "hidden_size": 2560, "head_dim": 128,
    "num_attention_heads": 32, "num_key_value_heads": 8, "use_sliding_window": false,
    "sliding_window": null, "max_window_layers": 36})");
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kFullAttention), range(0, 3));
  EXPECT_EQ(m.layers[0].head_size, 128);  // not 2560 / 32 = 80
  EXPECT_FLOAT_EQ(m.layers[0].scale, 1.0f / std::sqrt(128.0f));
}

TEST(Families, Gemma2AlternatesWithSoftCapAndQueryScalar) {
  const ModelDescription m = parse_inline(R"({
    "model_type": "gemma2", "num_hidden_layers": 4, "hidden_size": 4608, "head_dim": 128,
    "num_attention_heads": 32, "num_key_value_heads": 16, "sliding_window": 4096,
    "attn_logit_softcapping": 50.0, "final_logit_softcapping": 30.0,
    "query_pre_attn_scalar": 144})");
  // (i + 1) % 2 != 0 slides: 0 and 2; 1 and 3 are full.
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kSlidingWindow), (std::vector<int>{0, 2}));
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kFullAttention), (std::vector<int>{1, 3}));
  for (const LayerSpec& l : m.layers) {
    EXPECT_EQ(l.soft_cap, 50.0f);
    EXPECT_FLOAT_EQ(l.scale, 1.0f / 12.0f);  // 144^-0.5, not 128^-0.5
    EXPECT_EQ(l.head_size, 128);
  }
  const AttentionLayerParams p = layer_params(m.layers[1], DType::kBFloat16, KvCacheDType::kAuto);
  EXPECT_FLOAT_EQ(p.soft_cap, 50.0f);
  EXPECT_EQ(selector_config(m.layers[0], DType::kBFloat16, KvCacheDType::kAuto).soft_cap, 50.0f);
}

TEST(Families, Phi3SlidesOnEveryLayerWithDerivedHeadSize) {
  const ModelDescription m = parse_inline(R"({
    "model_type": "phi3", "num_hidden_layers": 32, "hidden_size": 3072,
    "num_attention_heads": 32, "sliding_window": 2047})");
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kSlidingWindow), range(0, 32));
  EXPECT_EQ(m.layers[7].sliding_window, 2047);
  EXPECT_EQ(m.layers[0].head_size, 96);     // 3072 / 32
  EXPECT_EQ(m.layers[0].num_kv_heads, 32);  // absent -> num_attention_heads
}

TEST(Families, Cohere2IsFullOnEveryFourthLayer) {
  const ModelDescription m = parse_inline(R"({
    "model_type": "cohere2", "num_hidden_layers": 8, "hidden_size": 4096,
    "num_attention_heads": 32, "num_key_value_heads": 8, "sliding_window": 4096,
    "sliding_window_pattern": 4})");
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kFullAttention), (std::vector<int>{3, 7}));
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kSlidingWindow), (std::vector<int>{0, 1, 2, 4, 5, 6}));
  EXPECT_EQ(m.layers[0].head_size, 128);
}

TEST(Families, Gemma3NestedTextConfigUsesTheClassDefaults) {
  // Multimodal Gemma-3 checkpoints omit fields that equal Gemma3TextConfig's defaults.
  const ModelDescription m = parse_inline(R"({
    "model_type": "gemma3", "architectures": ["Gemma3ForConditionalGeneration"],
    "text_config": {"model_type": "gemma3_text", "hidden_size": 2560,
                    "num_hidden_layers": 34, "sliding_window": 1024}})");
  EXPECT_EQ(m.model_type, "gemma3_text");
  ASSERT_EQ(m.layers.size(), 34u);
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kFullAttention), every(5, 6, 34));  // 5..29
  EXPECT_EQ(m.layers[0].sliding_window, 1024);
  EXPECT_EQ(m.layers[0].num_heads, 8);
  EXPECT_EQ(m.layers[0].num_kv_heads, 4);
  EXPECT_EQ(m.layers[0].head_size, 256);
  EXPECT_FLOAT_EQ(m.layers[0].scale, 1.0f / 16.0f);
}

TEST(Families, Gemma3ExplicitLayerTypesWinOverThePattern) {
  const ModelDescription m = parse_inline(R"({
    "model_type": "gemma3_text", "num_hidden_layers": 3, "num_attention_heads": 4,
    "num_key_value_heads": 1, "head_dim": 256, "sliding_window": 512,
    "sliding_window_pattern": 6,
    "layer_types": ["full_attention", "sliding_attention", "full_attention"]})");
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kFullAttention), (std::vector<int>{0, 2}));
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kSlidingWindow), (std::vector<int>{1}));
}

TEST(Families, Llama4ExplicitNoRopeListMarksNopeLayersFull) {
  // no_rope_layers[i] == 1: RoPE (chunked); 0: NoPE (full attention).
  const ModelDescription m = parse_inline(R"({
    "model_type": "llama4", "text_config": {"model_type": "llama4_text",
      "num_hidden_layers": 5, "num_attention_heads": 40, "num_key_value_heads": 8,
      "head_dim": 128, "attention_chunk_size": 8192, "no_rope_layers": [1, 1, 0, 1, 0]}})");
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kChunkedLocalAttention), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kFullAttention), (std::vector<int>{2, 4}));
  EXPECT_FALSE(m.layers[2].uses_rope);
  EXPECT_TRUE(m.layers[3].uses_rope);
}

TEST(Families, Llama4NopeIntervalAndNoChunkSize) {
  const ModelDescription interval = parse_inline(R"({
    "model_type": "llama4_text", "num_hidden_layers": 6, "num_attention_heads": 8,
    "head_dim": 64, "attention_chunk_size": 1024, "no_rope_layer_interval": 3})");
  EXPECT_EQ(layers_of_kind(interval, KvCacheKind::kFullAttention), (std::vector<int>{2, 5}));
  EXPECT_EQ(interval.layers[0].chunk_size, 1024);
  const ModelDescription unchunked = parse_inline(R"({
    "model_type": "llama4_text", "num_hidden_layers": 4, "num_attention_heads": 8,
    "head_dim": 64, "attention_chunk_size": null})");
  EXPECT_EQ(layers_of_kind(unchunked, KvCacheKind::kFullAttention), range(0, 4));
  EXPECT_FALSE(unchunked.layers[3].uses_rope);  // still NoPE, just not chunked
}

TEST(Families, DeepseekV3WithQLoraRank) {
  const ModelDescription m = parse_inline(R"({
    "model_type": "deepseek_v3", "num_hidden_layers": 2, "num_attention_heads": 128,
    "num_key_value_heads": 128, "kv_lora_rank": 512, "q_lora_rank": 1536,
    "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
    "rope_scaling": {"type": "yarn", "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0}})");
  ASSERT_EQ(m.layers.size(), 2u);
  EXPECT_EQ(m.layers[0].kind, KvCacheKind::kMlaAttention);
  EXPECT_EQ(m.layers[0].mla->q_lora_rank, 1536);
  const double mscale = 0.1 * std::log(40.0) + 1.0;
  EXPECT_NEAR(m.layers[0].scale, mscale * mscale / std::sqrt(192.0), 1e-6);
  // Without rope scaling the scale is plain (nope + rope)^-0.5.
  const ModelDescription plain = parse_inline(R"({
    "model_type": "deepseek_v2", "num_hidden_layers": 1, "num_attention_heads": 16,
    "kv_lora_rank": 512, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128})");
  EXPECT_FLOAT_EQ(plain.layers[0].scale, 1.0f / std::sqrt(192.0f));
}

TEST(Families, BartHasEncoderDecoderAndCrossStacks) {
  const ModelDescription m = parse_inline(R"({
    "model_type": "bart", "is_encoder_decoder": true, "d_model": 1024,
    "encoder_layers": 2, "decoder_layers": 3, "encoder_attention_heads": 16,
    "decoder_attention_heads": 8, "max_position_embeddings": 1024})");
  ASSERT_EQ(m.layers.size(), 8u);  // 2 encoder + 3 decoder + 3 cross
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kEncoderOnlyAttention), range(0, 2));
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kFullAttention), range(2, 5));
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kCrossAttention), range(5, 8));
  EXPECT_EQ(m.layers[0].head_size, 64);   // 1024 / 16
  EXPECT_EQ(m.layers[2].head_size, 128);  // 1024 / 8
  EXPECT_EQ(m.layers[5].num_heads, 8);    // cross attention uses the decoder's heads
  EXPECT_EQ(m.max_encoder_len, 1024);
}

TEST(Families, T5NamesHeadSizeDirectlyAndDoesNotScale) {
  const ModelDescription m = parse_inline(R"({
    "model_type": "t5", "is_encoder_decoder": true, "d_model": 512, "d_kv": 64,
    "num_heads": 8, "num_layers": 6, "num_decoder_layers": 4})");
  ASSERT_EQ(m.layers.size(), 14u);  // 6 + 4 + 4
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kEncoderOnlyAttention), range(0, 6));
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kFullAttention), range(6, 10));
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kCrossAttention), range(10, 14));
  for (const LayerSpec& l : m.layers) {
    EXPECT_EQ(l.head_size, 64);
    EXPECT_FLOAT_EQ(l.scale, 1.0f);
  }
  EXPECT_EQ(m.max_encoder_len, 512);
}

TEST(Families, LayerTypesOfUnknownStateLayersListThemWithoutABackend) {
  // gpt_oss is not a hybrid family: its config cannot say what a "mamba" layer keeps, so
  // the layer is listed (indices stay the config's) but needs no backend.
  const ModelDescription with_mamba = parse_inline(R"({
    "model_type": "gpt_oss", "num_hidden_layers": 2, "num_attention_heads": 8, "head_dim": 64,
    "sliding_window": 128, "layer_types": ["mamba", "sliding_attention"]})");
  EXPECT_FALSE(with_mamba.layers[0].is_attention);
  EXPECT_FALSE(with_mamba.layers[0].needs_backend());
  EXPECT_EQ(describe_kind(with_mamba.layers[0]), "no attention (mamba)");
  EXPECT_EQ(with_mamba.layers[1].kind, KvCacheKind::kSlidingWindow);
  try {
    selector_config(with_mamba.layers[0], DType::kBFloat16, KvCacheDType::kAuto);
    FAIL() << "a layer without state sizes has no selector config";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("needs no attention backend"), std::string::npos);
  }
  EXPECT_THROW(layer_params(with_mamba.layers[0], DType::kBFloat16, KvCacheDType::kAuto), Error);
}

TEST(Families, UnknownModelTypeIsReadAsPlainDecoderWithAWarning) {
  const ModelDescription m = parse_inline(R"({
    "model_type": "my_new_lm", "num_hidden_layers": 3, "hidden_size": 2048,
    "num_attention_heads": 16, "num_key_value_heads": 4})");
  ASSERT_EQ(m.warnings.size(), 1u);
  EXPECT_NE(m.warnings[0].find("model_type 'my_new_lm' is not one attnkit knows"),
            std::string::npos);
  EXPECT_NE(m.warnings[0].find("plain decoder"), std::string::npos);
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kFullAttention), range(0, 3));
  EXPECT_EQ(m.layers[0].head_size, 128);
  EXPECT_EQ(m.layers[0].num_kv_heads, 4);

  const ModelDescription sliding = parse_inline(R"({
    "model_type": "my_new_lm", "num_hidden_layers": 2, "head_dim": 64,
    "num_attention_heads": 16, "sliding_window": 1024})");
  EXPECT_EQ(layers_of_kind(sliding, KvCacheKind::kSlidingWindow), range(0, 2));
}

TEST(Families, NonComputeTorchDtypeLeavesDtypeUnset) {
  const ModelDescription m = parse_inline(R"({
    "model_type": "llama", "num_hidden_layers": 1, "hidden_size": 64,
    "num_attention_heads": 1, "torch_dtype": "float8_e4m3fn"})");
  EXPECT_FALSE(m.dtype.has_value());
  const ModelDescription h = parse_inline(R"({
    "model_type": "llama", "num_hidden_layers": 1, "hidden_size": 64,
    "num_attention_heads": 1, "torch_dtype": "float16"})");
  EXPECT_EQ(h.dtype, DType::kFloat16);
}

}  // namespace
}  // namespace attnkit
