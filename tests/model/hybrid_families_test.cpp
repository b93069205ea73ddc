// Hybrid models (attention mixed with recurrent-state layers of the mamba kind) and the
// other families read as vLLM / transformers read them: the kind and sizes of every layer,
// from the published configs in models/ and from inline configs that use each family's
// field names. Expected values are worked out by hand from the configs.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "attnkit/core/error.h"
#include "attnkit/model/model_loader.h"
#include "attnkit/selector/layer_config.h"
#include "model_test_util.h"

namespace attnkit {
namespace {

using testing::every;
using testing::layers_of_kind;
using testing::parse_inline;
using testing::range;

// Indices of the layers holding a state of `type`.
std::vector<int> state_layers(const ModelDescription& m, StateLayerType type) {
  std::vector<int> out;
  for (const LayerSpec& l : m.layers) {
    if (l.state && l.state->type == type) {
      EXPECT_EQ(l.kind, KvCacheKind::kMamba);
      EXPECT_FALSE(l.is_attention);
      out.push_back(l.index);
    }
  }
  return out;
}

std::vector<int> complement(const std::vector<int>& of, int n) {
  std::vector<int> out;
  for (int i = 0; i < n; ++i) {
    if (std::find(of.begin(), of.end(), i) == of.end()) out.push_back(i);
  }
  return out;
}

std::string error_of(const std::string& json) {
  try {
    parse_inline(json);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(HybridFamilies, Qwen3NextIsOneFullLayerInFourAndGatedDeltaNetElsewhere) {
  // full_attention_interval 4, no layer_types: layers 3, 7, ..., 47 are full attention.
  const ModelDescription m = load_model("qwen3-next-80b-a3b-thinking");
  ASSERT_EQ(m.layers.size(), 48u);
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kFullAttention), every(3, 4, 48));
  EXPECT_EQ(state_layers(m, StateLayerType::kGatedDeltaNet), complement(every(3, 4, 48), 48));
  EXPECT_EQ(m.num_attention_layers(), 12);
  EXPECT_EQ(m.num_state_layers(), 36);
  const LayerSpec& full = m.layers[3];
  EXPECT_EQ(full.num_heads, 16);
  EXPECT_EQ(full.num_kv_heads, 2);
  EXPECT_EQ(full.head_size, 256);
  const StateLayerDims& s = *m.layers[0].state;
  EXPECT_EQ(s.num_k_heads, 16);
  EXPECT_EQ(s.head_k_dim, 128);
  EXPECT_EQ(s.num_heads, 32);
  EXPECT_EQ(s.head_dim, 128);
  EXPECT_EQ(s.conv_kernel, 4);
  // conv over q, k (16 x 128 each) and v (32 x 128): 8192 channels x 3 previous inputs;
  // recurrent state 32 x 128 x 128; both float32.
  EXPECT_EQ(s.conv_channels(), 8192);
  EXPECT_EQ(s.conv_shape(), (std::vector<int>{8192, 3}));
  EXPECT_EQ(s.recurrent_shape(), (std::vector<int>{32, 128, 128}));
  EXPECT_EQ(s.bytes(), 8192u * 3 * 4 + 32u * 128 * 128 * 4);
  EXPECT_TRUE(m.warnings.empty());
}

TEST(HybridFamilies, NemotronHFollowsItsOverridePattern) {
  // hybrid_override_pattern: M = Mamba2, * = attention, - = MLP (118 characters).
  const ModelDescription m = load_model("nemotron-h-56b-base-8k");
  ASSERT_EQ(m.layers.size(), 118u);
  const std::vector<int> attention = layers_of_kind(m, KvCacheKind::kFullAttention);
  EXPECT_EQ(attention, (std::vector<int>{7, 18, 29, 40, 51, 62, 73, 84, 95, 106}));
  EXPECT_EQ(m.num_state_layers(), 54);
  int mlp = 0;
  for (const LayerSpec& l : m.layers) {
    if (!l.needs_backend()) {
      ++mlp;
      EXPECT_EQ(l.layer_type, "mlp");
    }
  }
  EXPECT_EQ(mlp, 54);
  EXPECT_EQ(m.layers[7].num_heads, 64);
  EXPECT_EQ(m.layers[7].num_kv_heads, 8);
  EXPECT_EQ(m.layers[7].head_size, 128);
  const StateLayerDims& s = *m.layers[0].state;
  EXPECT_EQ(s.type, StateLayerType::kMamba2);
  EXPECT_EQ(s.num_heads, 256);
  EXPECT_EQ(s.head_dim, 64);
  EXPECT_EQ(s.n_groups, 8);
  EXPECT_EQ(s.state_size, 256);
  // conv over x (256 x 64) and B, C (8 x 256 each).
  EXPECT_EQ(s.conv_channels(), 256 * 64 + 2 * 8 * 256);
  EXPECT_EQ(s.recurrent_shape(), (std::vector<int>{256, 64, 256}));
}

TEST(HybridFamilies, JambaHasAttentionEveryEighthLayerFromTheFourth) {
  // attn_layer_period 8, attn_layer_offset 4; Mamba1 with d_inner = 2 x 4096, dt_rank
  // "auto" = ceil(4096 / 16).
  const ModelDescription m = load_model("jamba-v0.1");
  ASSERT_EQ(m.layers.size(), 32u);
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kFullAttention), every(4, 8, 32));
  EXPECT_EQ(state_layers(m, StateLayerType::kMamba1), complement(every(4, 8, 32), 32));
  const StateLayerDims& s = *m.layers[0].state;
  EXPECT_EQ(s.inner_size, 8192);
  EXPECT_EQ(s.state_size, 16);
  EXPECT_EQ(s.dt_rank, 256);
  EXPECT_EQ(s.conv_kernel, 4);
  EXPECT_EQ(m.layers[4].head_size, 128);
  EXPECT_EQ(m.layers[4].num_kv_heads, 8);
}

TEST(HybridFamilies, BambaAndGraniteHybridsNameTheirAttentionLayers) {
  const ModelDescription bamba = parse_inline(R"({
    "model_type": "bamba", "num_hidden_layers": 6, "hidden_size": 256,
    "num_attention_heads": 8, "num_key_value_heads": 2, "attn_layer_indices": [2, 5],
    "mamba_n_heads": 16, "mamba_d_head": "auto", "mamba_n_groups": 1, "mamba_d_state": 32,
    "mamba_d_conv": 4, "mamba_expand": 2})");
  EXPECT_EQ(layers_of_kind(bamba, KvCacheKind::kFullAttention), (std::vector<int>{2, 5}));
  EXPECT_EQ(state_layers(bamba, StateLayerType::kMamba2), (std::vector<int>{0, 1, 3, 4}));
  // head_dim "auto" = mamba_expand x hidden_size / mamba_n_heads = 2 x 256 / 16.
  EXPECT_EQ(bamba.layers[0].state->head_dim, 32);

  const ModelDescription granite = parse_inline(R"({
    "model_type": "granitemoehybrid", "num_hidden_layers": 4, "hidden_size": 128,
    "num_attention_heads": 4, "num_key_value_heads": 1,
    "layer_types": ["mamba", "mamba", "attention", "mamba"],
    "mamba_n_heads": 8, "mamba_d_head": 32, "mamba_n_groups": 2, "mamba_d_state": 16,
    "mamba_d_conv": 4})");
  EXPECT_EQ(layers_of_kind(granite, KvCacheKind::kFullAttention), (std::vector<int>{2}));
  EXPECT_EQ(state_layers(granite, StateLayerType::kMamba2), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(granite.layers[0].state->n_groups, 2);
}

TEST(HybridFamilies, FalconH1RunsAttentionAndMamba2SideBySideInEveryLayer) {
  const ModelDescription m = parse_inline(R"({
    "model_type": "falcon_h1", "num_hidden_layers": 3, "hidden_size": 256, "head_dim": 64,
    "num_attention_heads": 4, "num_key_value_heads": 2, "mamba_n_heads": 8,
    "mamba_d_head": 16, "mamba_n_groups": 1, "mamba_d_state": 32, "mamba_d_conv": 4})");
  ASSERT_EQ(m.layers.size(), 6u);  // two per config layer
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kFullAttention), (std::vector<int>{0, 2, 4}));
  EXPECT_EQ(state_layers(m, StateLayerType::kMamba2), (std::vector<int>{1, 3, 5}));
  EXPECT_EQ(m.layers[2].name, "layers.1.self_attn");
  EXPECT_EQ(m.layers[3].name, "layers.1.mamba2");
}

TEST(HybridFamilies, Lfm2ConvLayersAreShortConvolutions) {
  const ModelDescription m = parse_inline(R"({
    "model_type": "lfm2", "num_hidden_layers": 5, "hidden_size": 512,
    "num_attention_heads": 8, "num_key_value_heads": 2, "conv_L_cache": 3,
    "full_attn_idxs": [2, 4]})");
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kFullAttention), (std::vector<int>{2, 4}));
  EXPECT_EQ(state_layers(m, StateLayerType::kShortConv), (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(m.layers[0].state->conv_shape(), (std::vector<int>{512, 2}));
  EXPECT_TRUE(m.layers[0].state->recurrent_shape().empty());
  const ModelDescription typed = parse_inline(R"({
    "model_type": "lfm2", "num_hidden_layers": 2, "hidden_size": 64,
    "num_attention_heads": 4, "conv_L_cache": 3, "layer_types": ["conv", "full_attention"]})");
  EXPECT_EQ(state_layers(typed, StateLayerType::kShortConv), (std::vector<int>{0}));
}

TEST(HybridFamilies, MiniMaxAttnTypeListMarksSoftmaxLayers) {
  const ModelDescription m = parse_inline(R"({
    "model_type": "minimax", "num_hidden_layers": 4, "hidden_size": 512, "head_dim": 64,
    "num_attention_heads": 8, "num_key_value_heads": 8, "attn_type_list": [0, 0, 0, 1]})");
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kFullAttention), (std::vector<int>{3}));
  EXPECT_EQ(state_layers(m, StateLayerType::kLinearAttention), (std::vector<int>{0, 1, 2}));
  // Lightning attention keeps a [heads][d][d] state and no convolution.
  EXPECT_EQ(m.layers[0].state->recurrent_shape(), (std::vector<int>{8, 64, 64}));
  EXPECT_TRUE(m.layers[0].state->conv_shape().empty());
  EXPECT_NE(error_of(R"({"model_type": "minimax", "num_hidden_layers": 2, "hidden_size": 64,
      "num_attention_heads": 4, "attn_type_list": [0, 2]})")
                .find("must hold 0 (linear) or 1 (softmax), but element 1 is 2"),
            std::string::npos);
}

TEST(HybridFamilies, KimiLinearMixesDeltaAttentionWithMla) {
  const ModelDescription m = parse_inline(R"({
    "model_type": "kimi_linear", "num_hidden_layers": 4, "hidden_size": 512,
    "num_attention_heads": 8, "num_key_value_heads": 8, "kv_lora_rank": 256,
    "qk_rope_head_dim": 32, "qk_nope_head_dim": 64, "v_head_dim": 64,
    "linear_attn_config": {"full_attn_layers": [4], "kda_layers": [1, 2, 3], "num_heads": 8,
                           "head_dim": 64, "short_conv_kernel_size": 4}})");
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kMlaAttention), (std::vector<int>{3}));
  EXPECT_EQ(state_layers(m, StateLayerType::kKimiDeltaAttention), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(m.layers[3].head_size, 288);  // latent 256 + rope 32
  EXPECT_EQ(m.layers[0].state->conv_channels(), 3 * 8 * 64);
  EXPECT_NE(error_of(R"({"model_type": "kimi_linear", "num_hidden_layers": 4,
      "hidden_size": 512, "num_attention_heads": 8, "kv_lora_rank": 256,
      "qk_rope_head_dim": 32, "qk_nope_head_dim": 64, "v_head_dim": 64})")
                .find("'linear_attn_config' is missing"),
            std::string::npos);
}

TEST(HybridFamilies, RecurrentGemmaRepeatsItsBlockTypesWithLocalAttention) {
  const ModelDescription m = parse_inline(R"({
    "model_type": "recurrent_gemma", "num_hidden_layers": 5, "hidden_size": 256,
    "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 64, "lru_width": 256,
    "conv1d_width": 4, "attention_window_size": 2048,
    "block_types": ["recurrent", "recurrent", "attention"]})");
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kSlidingWindow), (std::vector<int>{2}));
  EXPECT_EQ(m.layers[2].sliding_window, 2048);
  EXPECT_EQ(state_layers(m, StateLayerType::kRgLru), (std::vector<int>{0, 1, 3, 4}));
  EXPECT_EQ(m.layers[0].state->recurrent_shape(), (std::vector<int>{256}));
}

TEST(HybridFamilies, BadPatternsAndSizesNameTheField) {
  EXPECT_NE(error_of(R"({"model_type": "nemotron_h", "hybrid_override_pattern": "M*X",
      "num_attention_heads": 4, "hidden_size": 64, "mamba_num_heads": 4, "mamba_head_dim": 8,
      "n_groups": 1, "ssm_state_size": 8, "conv_kernel": 4})")
                .find("has 'X' at position 2; valid: M (Mamba2), * (attention), - (MLP), E (MoE)"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"model_type": "jamba", "num_hidden_layers": 4, "hidden_size": 64,
      "num_attention_heads": 4, "attn_layer_period": 2, "attn_layer_offset": 2,
      "mamba_d_state": 4, "mamba_d_conv": 4})")
                .find("'attn_layer_offset' (2) must be below attn_layer_period (2)"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"model_type": "qwen3_next", "num_hidden_layers": 4,
      "num_attention_heads": 4, "head_dim": 64, "linear_num_key_heads": 4,
      "linear_key_head_dim": 32, "linear_num_value_heads": 6, "linear_value_head_dim": 32,
      "linear_conv_kernel_dim": 4})")
                .find("num_heads (value heads) is 6, but it must be a multiple of num_k_heads "
                      "(4)"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"model_type": "bamba", "num_hidden_layers": 2, "hidden_size": 64,
      "num_attention_heads": 4, "attn_layer_indices": [5], "mamba_n_heads": 4,
      "mamba_d_state": 8, "mamba_d_conv": 4})")
                .find("element 0 is 5, but layers are 0..1"),
            std::string::npos);
}

TEST(ModelFields, MlaIsRecognisedByItsFieldsWhateverTheModelType) {
  // DeepSeek-V3.2 and Kimi-K2 are DeepSeek-V3 layouts under model types of their own.
  for (const char* name : {"deepseek-v3.2", "kimi-k2-instruct"}) {
    const ModelDescription m = load_model(name);
    ASSERT_EQ(m.layers.size(), 61u) << name;
    EXPECT_EQ(layers_of_kind(m, KvCacheKind::kMlaAttention), range(0, 61)) << name;
    EXPECT_EQ(m.layers[0].head_size, 576);  // 512 + 64
    EXPECT_EQ(m.layers[0].head_size_v, 512);
    EXPECT_TRUE(m.warnings.empty()) << name;
  }
  const ModelDescription unknown = parse_inline(R"({
    "model_type": "my_latent_lm", "num_hidden_layers": 2, "hidden_size": 1024,
    "num_attention_heads": 8, "kv_lora_rank": 128, "qk_rope_head_dim": 32,
    "qk_nope_head_dim": 64, "v_head_dim": 64})");
  EXPECT_EQ(layers_of_kind(unknown, KvCacheKind::kMlaAttention), range(0, 2));
  ASSERT_EQ(unknown.warnings.size(), 1u);
  EXPECT_NE(unknown.warnings[0].find("read as multi-head latent attention"), std::string::npos);
}

TEST(ModelFields, UnknownTypeWithoutAttentionFieldsIsRefusedWithTheFieldsLookedFor) {
  const std::string error =
      error_of(R"({"model_type": "my_vision_tower", "num_hidden_layers": 2, "patch_size": 14})");
  EXPECT_NE(error.find("model_type 'my_vision_tower' is not one attnkit knows, and it has none "
                       "of the attention fields"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("num_attention_heads"), std::string::npos);
  EXPECT_NE(error.find("kv_lora_rank + qk_rope_head_dim"), std::string::npos);
}

TEST(ModelFields, Gemma4FullLayersHaveTheirOwnHeadSizeAndKvHeads) {
  // text_config: sliding layers head_dim 256 with 8 KV heads; the full layers (5, 11, ...,
  // 29) global_head_dim 512 with num_global_key_value_heads 2.
  const ModelDescription m = load_model("gemma-4-26b-a4b");
  ASSERT_EQ(m.layers.size(), 30u);
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kFullAttention), every(5, 6, 30));
  for (const LayerSpec& l : m.layers) {
    const bool full = l.kind == KvCacheKind::kFullAttention;
    EXPECT_EQ(l.head_size, full ? 512 : 256) << l.index;
    EXPECT_EQ(l.num_kv_heads, full ? 2 : 8) << l.index;
    EXPECT_FLOAT_EQ(l.scale, full ? 1.0f / std::sqrt(512.0f) : 1.0f / 16.0f) << l.index;
    if (!full) {
      EXPECT_EQ(l.sliding_window, 1024);
    }
  }
  EXPECT_EQ(m.dtype, DType::kBFloat16);
}

TEST(ModelFields, LearnedSinksKeepTheKind) {
  // gpt-oss's sink logits are a softmax term, not cached tokens: its full layers are
  // full_attention (vLLM's kind), and a backend must declare sinks to serve them.
  const ModelDescription m = load_model("gpt-oss-20b");
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kFullAttention), every(1, 2, 24));
  EXPECT_TRUE(layers_of_kind(m, KvCacheKind::kSinkFullAttention).empty());
  const SelectorConfig c = selector_config(m.layers[1], DType::kBFloat16, KvCacheDType::kAuto);
  EXPECT_TRUE(c.has_sinks);
  EXPECT_EQ(c.sink_len, 0);
  EXPECT_EQ(kind_of(c), KvCacheKind::kFullAttention);
  SelectorConfig tokens = c;
  tokens.sink_len = 4;  // static sink tokens held in the cache
  EXPECT_EQ(kind_of(tokens), KvCacheKind::kSinkFullAttention);
}

TEST(ModelFields, Float32CheckpointsRunInBf16OrFp16ByPlatformLikeVllmsAutoDtype) {
  const ModelDescription whisper = load_model("whisper-tiny");
  ASSERT_EQ(whisper.dtype, DType::kFloat32);
  EXPECT_EQ(resolve_model_dtype(std::nullopt, whisper, parse_platform("cuda:9.0")),
            DType::kBFloat16);
  EXPECT_EQ(resolve_model_dtype(std::nullopt, whisper, parse_platform("cuda:7.5")),
            DType::kFloat16);
  EXPECT_EQ(resolve_model_dtype(std::nullopt, whisper, parse_platform("cpu")), DType::kBFloat16);
  // An explicit dtype wins; a float16 checkpoint keeps float16.
  EXPECT_EQ(resolve_model_dtype(DType::kFloat32, whisper, parse_platform("cuda:9.0")),
            DType::kFloat32);
  ModelDescription half = whisper;
  half.dtype = DType::kFloat16;
  EXPECT_EQ(resolve_model_dtype(std::nullopt, half, parse_platform("cuda:9.0")), DType::kFloat16);
}

TEST(ModelFields, PythonsNonFiniteWordsAreReadAsFloats) {
  // Nemotron-H publishes "time_step_limit": [0.0, Infinity], as Python's json writes it.
  const ModelDescription m = parse_inline(R"({"model_type": "llama", "num_hidden_layers": 1,
      "hidden_size": 64, "num_attention_heads": 1, "time_step_limit": [0.0, Infinity],
      "other": -Infinity, "nan": NaN, "text": "Infinity, NaN"})");
  EXPECT_EQ(m.layers.size(), 1u);
  EXPECT_NE(error_of(R"({"model_type": "llama", "x": Infinityy})").find("parse error"),
            std::string::npos);
}

}  // namespace
}  // namespace attnkit
