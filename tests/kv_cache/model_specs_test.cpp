// The hand-built layer specs of the other tests agree with what spec_for_layer() derives
// from the model parser's description of the real configs in models/.

#include <gtest/gtest.h>

#include "attnkit/kv_cache/spec_factory.h"
#include "attnkit/model/model_loader.h"
#include "attnkit/selector/layer_config.h"
#include "kv_cache/kv_test_support.h"

namespace attnkit {
namespace {

std::vector<KvCacheSpec> specs_from_model(const char* name) {
  const ModelDescription model = load_model(name);
  std::vector<KvCacheSpec> specs;
  for (const LayerSpec& layer : model.layers) {
    if (!layer.is_attention) continue;
    specs.push_back(spec_for_layer(selector_config(layer, DType::kBFloat16, KvCacheDType::kAuto),
                                   model.max_encoder_len));
  }
  return specs;
}

TEST(KvSpecFromModel, HandBuiltSpecsMatchTheParsedConfigs) {
  EXPECT_EQ(specs_from_model("gemma-3-1b-it"), testing::gemma3_1b_specs());
  EXPECT_EQ(specs_from_model("llama-3.1-8b-instruct"), testing::llama31_8b_specs());
  EXPECT_EQ(specs_from_model("deepseek-v2-lite"), testing::deepseek_v2_lite_specs());
  EXPECT_EQ(specs_from_model("gpt-oss-20b"), testing::gpt_oss_20b_specs());
}

TEST(KvSpecFromModel, EncoderModelsHaveTheirKinds) {
  for (const KvCacheSpec& s : specs_from_model("bert-base-uncased")) EXPECT_FALSE(s.has_cache());
  int cross = 0, full = 0, none = 0;
  for (const KvCacheSpec& s : specs_from_model("whisper-tiny")) {
    cross += s.kind == KvCacheKind::kCrossAttention;
    full += s.kind == KvCacheKind::kFullAttention;
    none += !s.has_cache();
    if (s.kind == KvCacheKind::kCrossAttention) {
      EXPECT_EQ(s.max_encoder_len, 1500);
    }
  }
  EXPECT_EQ(cross, 4);
  EXPECT_EQ(full, 4);
  EXPECT_EQ(none, 4);
}

}  // namespace
}  // namespace attnkit
