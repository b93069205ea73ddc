// Every config in models/: layer counts, kinds, windows, head sizes and KV heads, each
// worked out by hand from the config (comments show the arithmetic).

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "attnkit/model/model_loader.h"
#include "attnkit/selector/layer_config.h"
#include "model_test_util.h"

namespace attnkit {
namespace {

using testing::every;
using testing::layers_of_kind;
using testing::range;

ModelDescription embedded(const char* name) { return load_model(name); }

TEST(EmbeddedModels, NamesMatchTheModelsFolder) {
  std::vector<std::string> files;
  for (const auto& e : std::filesystem::directory_iterator(ATTNKIT_MODELS_DIR)) {
    if (e.path().extension() == ".json") {
      std::string name = e.path().filename().string();
      files.push_back(name.substr(0, name.size() - 5));
    }
  }
  std::sort(files.begin(), files.end());
  EXPECT_EQ(embedded_model_names(), files);
  ASSERT_GE(files.size(), 8u);
}

TEST(EmbeddedModels, EmbeddedTextEqualsTheFileAndParsesTheSame) {
  for (const std::string& name : embedded_model_names()) {
    const auto path = std::filesystem::path(ATTNKIT_MODELS_DIR) / (name + ".json");
    const ModelDescription from_file = load_model(path.string());
    const ModelDescription from_name = load_model(name);
    EXPECT_EQ(from_file.layers, from_name.layers) << name;
    EXPECT_EQ(from_file.name, name);
    EXPECT_EQ(from_name.source, "embedded:" + name);
    EXPECT_EQ(from_file.source, path.string());
  }
}

TEST(EmbeddedModels, EveryKindAgreesWithKindOf) {
  for (const std::string& name : embedded_model_names()) {
    const ModelDescription m = load_model(name);
    for (const LayerSpec& l : m.layers) {
      EXPECT_EQ(l.index, &l - m.layers.data());
      // MLP blocks some hybrid configs list as layers need no backend and have no kind.
      if (!l.needs_backend()) continue;
      EXPECT_EQ(l.kind, kind_of(selector_config(l, DType::kFloat16, KvCacheDType::kAuto)))
          << name << " layer " << l.index;
      EXPECT_EQ(l.is_attention, !l.state.has_value()) << name << " layer " << l.index;
    }
    EXPECT_TRUE(m.warnings.empty()) << name << ": " << m.warnings.front();
  }
}

TEST(EmbeddedModels, Gemma3_1bHasFiveSlidingLayersPerFullLayer) {
  const ModelDescription m = embedded("gemma-3-1b-it");
  EXPECT_EQ(m.model_type, "gemma3_text");
  EXPECT_EQ(m.architecture, "Gemma3ForCausalLM");
  EXPECT_EQ(m.dtype, DType::kBFloat16);
  ASSERT_EQ(m.layers.size(), 26u);
  // sliding_window_pattern 6: layer i is full when (i + 1) % 6 == 0 -> 5, 11, 17, 23.
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kFullAttention), (std::vector<int>{5, 11, 17, 23}));
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kSlidingWindow).size(), 22u);
  for (const LayerSpec& l : m.layers) {
    EXPECT_EQ(l.num_heads, 4);
    EXPECT_EQ(l.num_kv_heads, 1);
    EXPECT_EQ(l.head_size, 256);
    EXPECT_EQ(l.head_size_v, 256);
    EXPECT_FLOAT_EQ(l.scale, 1.0f / 16.0f);  // query_pre_attn_scalar 256 -> 256^-0.5
    EXPECT_FALSE(l.soft_cap.has_value());    // attn_logit_softcapping null
    EXPECT_FALSE(l.has_sinks);
    if (l.kind == KvCacheKind::kSlidingWindow) {
      EXPECT_EQ(l.sliding_window, 512);
      EXPECT_EQ(l.layer_type, "sliding_attention");
      EXPECT_EQ(describe_kind(l), "sliding_window(512)");
    } else {
      EXPECT_FALSE(l.sliding_window.has_value());
      EXPECT_EQ(describe_kind(l), "full_attention");
    }
  }
}

TEST(EmbeddedModels, Llama31_8bIsAllFullAttentionWithGqa) {
  const ModelDescription m = embedded("llama-3.1-8b-instruct");
  ASSERT_EQ(m.layers.size(), 32u);
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kFullAttention), range(0, 32));
  for (const LayerSpec& l : m.layers) {
    EXPECT_EQ(l.num_heads, 32);
    EXPECT_EQ(l.num_kv_heads, 8);
    EXPECT_EQ(l.head_size, 128);  // 4096 / 32
    EXPECT_FLOAT_EQ(l.scale, 1.0f / std::sqrt(128.0f));
    EXPECT_EQ(l.name, "layers." + std::to_string(l.index) + ".self_attn");
  }
}

TEST(EmbeddedModels, Mistral7bSlidesOnEveryLayer) {
  const ModelDescription m = embedded("mistral-7b-v0.1");
  ASSERT_EQ(m.layers.size(), 32u);
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kSlidingWindow), range(0, 32));
  for (const LayerSpec& l : m.layers) {
    EXPECT_EQ(l.sliding_window, 4096);
    EXPECT_EQ(l.num_kv_heads, 8);
    EXPECT_EQ(l.head_size, 128);  // 4096 / 32
  }
}

TEST(EmbeddedModels, GptOss20bAlternatesSlidingAndFullWithSinkLogits) {
  const ModelDescription m = embedded("gpt-oss-20b");
  ASSERT_EQ(m.layers.size(), 24u);
  // layer_types: sliding on even layers, full on odd; learned sink logits everywhere, which
  // do not change the kind (vLLM keeps these layers in full_attention / sliding_window).
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kSlidingWindow), every(0, 2, 24));
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kFullAttention), every(1, 2, 24));
  for (const LayerSpec& l : m.layers) {
    EXPECT_TRUE(l.has_sinks);
    EXPECT_EQ(l.num_heads, 64);
    EXPECT_EQ(l.num_kv_heads, 8);
    EXPECT_EQ(l.head_size, 64);
    EXPECT_FLOAT_EQ(l.scale, 0.125f);
    EXPECT_EQ(l.sliding_window.has_value(), l.index % 2 == 0);
    EXPECT_EQ(l.sliding_window.value_or(128), 128);
  }
}

TEST(EmbeddedModels, Llama4ScoutChunksRopeLayersAndKeepsNopeLayersFull) {
  const ModelDescription m = embedded("llama-4-scout-17b-16e");
  EXPECT_EQ(m.model_type, "llama4_text");  // from text_config
  EXPECT_EQ(m.dtype, DType::kBFloat16);
  ASSERT_EQ(m.layers.size(), 48u);
  // no_rope_layers is empty: NoPE every 4th layer, (i + 1) % 4 == 0 -> 3, 7, ..., 47.
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kFullAttention), every(3, 4, 48));
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kChunkedLocalAttention).size(), 36u);
  for (const LayerSpec& l : m.layers) {
    const bool nope = (l.index + 1) % 4 == 0;
    EXPECT_EQ(l.uses_rope, !nope);
    EXPECT_EQ(l.chunk_size.has_value(), !nope);
    EXPECT_EQ(l.chunk_size.value_or(8192), 8192);
    EXPECT_EQ(l.num_heads, 40);
    EXPECT_EQ(l.num_kv_heads, 8);
    EXPECT_EQ(l.head_size, 128);
  }
  EXPECT_EQ(describe_kind(m.layers[0]), "chunked_local_attention(8192)");
}

TEST(EmbeddedModels, DeepseekV2LiteIsMlaWithTheAbsorbedLatentCache) {
  const ModelDescription m = embedded("deepseek-v2-lite");
  ASSERT_EQ(m.layers.size(), 27u);
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kMlaAttention), range(0, 27));
  // yarn: mscale = 0.1 * 0.707 * ln(40) + 1; scale = (128 + 64)^-0.5 * mscale^2.
  const double mscale = 0.1 * 0.707 * std::log(40.0) + 1.0;
  const double scale = mscale * mscale / std::sqrt(192.0);
  EXPECT_NEAR(scale, 0.1147214, 1e-6);
  for (const LayerSpec& l : m.layers) {
    ASSERT_TRUE(l.mla.has_value());
    EXPECT_EQ(*l.mla, (MlaDims{512, 64, 128, 128, std::nullopt}));
    EXPECT_EQ(l.num_heads, 16);
    EXPECT_EQ(l.num_kv_heads, 1);
    EXPECT_EQ(l.head_size, 576);    // kv_lora_rank 512 + qk_rope_head_dim 64
    EXPECT_EQ(l.head_size_v, 512);  // V is the latent's first 512 elements
    EXPECT_NEAR(l.scale, scale, 1e-6);
  }
}

TEST(EmbeddedModels, BertIsEncoderOnly) {
  const ModelDescription m = embedded("bert-base-uncased");
  ASSERT_EQ(m.layers.size(), 12u);
  EXPECT_FALSE(m.is_encoder_decoder);
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kEncoderOnlyAttention), range(0, 12));
  for (const LayerSpec& l : m.layers) {
    EXPECT_EQ(l.attn_type, AttentionType::kEncoderOnly);
    EXPECT_EQ(l.num_heads, 12);
    EXPECT_EQ(l.num_kv_heads, 12);
    EXPECT_EQ(l.head_size, 64);  // 768 / 12
    EXPECT_FLOAT_EQ(l.scale, 0.125f);
  }
}

TEST(EmbeddedModels, WhisperTinyHasEncoderDecoderAndCrossLayers) {
  const ModelDescription m = embedded("whisper-tiny");
  EXPECT_TRUE(m.is_encoder_decoder);
  EXPECT_EQ(m.max_encoder_len, 1500);  // max_source_positions
  EXPECT_EQ(m.dtype, DType::kFloat32);
  ASSERT_EQ(m.layers.size(), 12u);  // 4 encoder + 4 decoder self + 4 cross
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kEncoderOnlyAttention), range(0, 4));
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kFullAttention), range(4, 8));
  EXPECT_EQ(layers_of_kind(m, KvCacheKind::kCrossAttention), range(8, 12));
  for (const LayerSpec& l : m.layers) {
    EXPECT_EQ(l.num_heads, 6);
    EXPECT_EQ(l.num_kv_heads, 6);
    EXPECT_EQ(l.head_size, 64);  // d_model 384 / 6
  }
  EXPECT_EQ(m.layers[0].attn_type, AttentionType::kEncoder);
  EXPECT_EQ(m.layers[4].attn_type, AttentionType::kDecoder);
  EXPECT_EQ(m.layers[8].attn_type, AttentionType::kEncoderDecoder);
  EXPECT_EQ(m.layers[0].name, "encoder.layers.0.self_attn");
  EXPECT_EQ(m.layers[5].name, "decoder.layers.1.self_attn");
  EXPECT_EQ(m.layers[11].name, "decoder.layers.3.encoder_attn");
}

TEST(EmbeddedModels, SelectorConfigAndLayerParamsCarryTheLayer) {
  const ModelDescription gpt = embedded("gpt-oss-20b");
  const SelectorConfig c =
      selector_config(gpt.layers[2], DType::kFloat16, KvCacheDType::kFp8E4M3, 32);
  EXPECT_EQ(c.head_size, 64);
  EXPECT_EQ(c.head_size_v, 64);
  EXPECT_EQ(c.num_heads, 64);
  EXPECT_EQ(c.num_kv_heads, 8);
  EXPECT_EQ(c.dtype, DType::kFloat16);
  EXPECT_EQ(c.kv_cache_dtype, KvCacheDType::kFp8E4M3);
  EXPECT_EQ(c.block_size, 32);
  EXPECT_TRUE(c.has_sinks);
  EXPECT_EQ(c.sliding_window, 128);
  EXPECT_EQ(c.attn_type, AttentionType::kDecoder);

  const AttentionLayerParams p = layer_params(gpt.layers[3], DType::kBFloat16, KvCacheDType::kAuto);
  EXPECT_EQ(p.layer_index, 3);
  EXPECT_EQ(p.kind, KvCacheKind::kFullAttention);
  EXPECT_EQ(p.sinks.size(), 64u);  // one sink logit per query head
  EXPECT_EQ(p.sliding_window, 0);
  EXPECT_FLOAT_EQ(p.scale, 0.125f);

  const ModelDescription ds = embedded("deepseek-v2-lite");
  const SelectorConfig mc = selector_config(ds.layers[0], DType::kBFloat16, KvCacheDType::kAuto);
  EXPECT_TRUE(mc.use_mla);
  EXPECT_EQ(mc.mla_rope_dim, 64);
  EXPECT_EQ(mc.head_size, 576);
  EXPECT_EQ(mc.head_size_v, 512);
  EXPECT_FALSE(mc.block_size.has_value());
  // "auto" is resolved once, here: what selection and the backends see is concrete.
  EXPECT_EQ(mc.kv_cache_dtype, KvCacheDType::kBFloat16);
  const AttentionLayerParams mp = layer_params(ds.layers[0], DType::kBFloat16, KvCacheDType::kAuto);
  EXPECT_TRUE(mp.use_mla);
  EXPECT_EQ(mp.num_kv_heads, 1);
  EXPECT_EQ(mp.mla_rope_dim, 64);
  EXPECT_TRUE(mp.sinks.empty());
  EXPECT_EQ(mp.kv_cache_dtype, KvCacheDType::kBFloat16);
  EXPECT_EQ(layer_params(ds.layers[0], DType::kFloat16, KvCacheDType::kFp8E4M3).kv_cache_dtype,
            KvCacheDType::kFp8E4M3);

  const ModelDescription llama4 = embedded("llama-4-scout-17b-16e");
  const AttentionLayerParams lp =
      layer_params(llama4.layers[0], DType::kBFloat16, KvCacheDType::kAuto);
  EXPECT_EQ(lp.chunk_size, 8192);
  EXPECT_EQ(lp.kind, KvCacheKind::kChunkedLocalAttention);

  const ModelDescription whisper = embedded("whisper-tiny");
  EXPECT_FALSE(layer_params(whisper.layers[0], DType::kFloat32, KvCacheDType::kAuto).is_causal());
  EXPECT_TRUE(layer_params(whisper.layers[4], DType::kFloat32, KvCacheDType::kAuto).is_causal());
  EXPECT_FALSE(
      selector_config(whisper.layers[8], DType::kFloat32, KvCacheDType::kAuto).is_causal());
  EXPECT_EQ(selector_config(whisper.layers[8], DType::kFloat32, KvCacheDType::kAuto).kv_cache_dtype,
            KvCacheDType::kFloat32);
  EXPECT_EQ(layer_params(whisper.layers[4], DType::kFloat16, KvCacheDType::kAuto).kv_cache_dtype,
            KvCacheDType::kFloat16);
}

}  // namespace
}  // namespace attnkit
