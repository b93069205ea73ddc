// Priority rules: conditions over the layer, the user's rules before the built-in ones,
// and what the report says about the rule that ordered the walk.
#include "attnkit/selector/priority_rule.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "attnkit/selector/priority.h"
#include "attnkit/selector/selection_report.h"
#include "attnkit/selector/selector.h"
#include "test_registry.h"

namespace attnkit {
namespace {

using testing::cpu;
using testing::cuda;
using testing::decoder;
using ::testing::ElementsAre;
using testing::error_message;
using ::testing::HasSubstr;

SelectorConfig gqa_layer(int heads, int kv_heads, int head_size = 128) {
  SelectorConfig c = decoder(head_size);
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  return c;
}

PriorityRule rule_from(std::string_view json) {
  return parse_priority_rule(nlohmann::json::parse(json), "priority[0]",
                             [](std::string_view name) { return std::string(name); });
}

TEST(PriorityCondition, EachFieldSelectsLayers) {
  PriorityCondition c;
  EXPECT_TRUE(c.matches(decoder(), PlatformKind::kCpu));
  EXPECT_EQ(c.describe(), "always");

  c.gqa_ratio = IntRange{4, std::nullopt};
  EXPECT_TRUE(c.matches(gqa_layer(32, 8), PlatformKind::kCpu));    // 4 queries per KV head
  EXPECT_FALSE(c.matches(gqa_layer(32, 16), PlatformKind::kCpu));  // 2
  EXPECT_FALSE(c.matches(decoder(), PlatformKind::kCpu));          // head counts unknown
  c = {};
  c.head_sizes = {64, 256};
  EXPECT_TRUE(c.matches(decoder(256), PlatformKind::kCpu));
  EXPECT_FALSE(c.matches(decoder(128), PlatformKind::kCpu));
  c = {};
  c.num_heads = IntRange{std::nullopt, 16};
  EXPECT_TRUE(c.matches(gqa_layer(16, 16), PlatformKind::kCpu));
  EXPECT_FALSE(c.matches(gqa_layer(32, 8), PlatformKind::kCpu));
  c = {};
  c.kv_cache_dtypes = {KvCacheDType::kFp8E4M3};
  SelectorConfig fp8 = decoder();
  fp8.kv_cache_dtype = KvCacheDType::kFp8E4M3;
  EXPECT_TRUE(c.matches(fp8, PlatformKind::kCuda));
  EXPECT_FALSE(c.matches(decoder(), PlatformKind::kCuda));  // auto resolves to bf16
  c = {};
  c.causal = false;
  SelectorConfig encoder = decoder();
  encoder.attn_type = AttentionType::kEncoderOnly;
  EXPECT_TRUE(c.matches(encoder, PlatformKind::kCpu));
  EXPECT_FALSE(c.matches(decoder(), PlatformKind::kCpu));
  c.platform = PlatformKind::kCuda;
  EXPECT_FALSE(c.matches(encoder, PlatformKind::kCpu));
  EXPECT_EQ(c.describe(), "platform=cuda, causal=false");
}

TEST(PriorityRuleJson, ParsesAndRoundTrips) {
  const PriorityRule rule = rule_from(
      R"({"name": "gqa", "when": {"platform": "cpu", "head_size": [64, 128],
          "num_heads": {"min": 1, "max": 64}, "gqa_ratio": {"min": 4},
          "kv_cache_dtype": ["bf16"], "causal": true, "mla": false},
          "order": ["REFERENCE", "CPU_FLASH"]})");
  EXPECT_EQ(rule.name, "gqa");
  EXPECT_EQ(rule.when.platform, PlatformKind::kCpu);
  EXPECT_EQ(rule.when.kv_cache_dtypes, std::vector<KvCacheDType>{KvCacheDType::kBFloat16});
  EXPECT_THAT(rule.order, ElementsAre("REFERENCE", "CPU_FLASH"));
  EXPECT_EQ(rule_from(to_json(rule).dump()), rule);
  EXPECT_EQ(rule.when.describe(),
            "platform=cpu, head_size in {64, 128}, num_heads in [1, 64], gqa_ratio >= 4, "
            "kv_cache_dtype in {bfloat16}, causal=true, mla=false");
}

TEST(PriorityRuleJson, BadRulesNameTheKeyAndTheValidOnes) {
  EXPECT_EQ(error_message([] { rule_from(R"({"when": {}, "order": ["A"], "if": 1})"); }),
            "Unknown key 'if' in priority[0]. Valid keys are: name, order, when");
  EXPECT_EQ(error_message([] { rule_from(R"({"when": {"heads": 4}, "order": ["A"]})"); }),
            "Unknown key 'heads' in priority[0]['when']. Valid keys are: causal, gqa_ratio, "
            "head_size, kv_cache_dtype, mla, num_heads, num_kv_heads, platform");
  EXPECT_EQ(error_message([] { rule_from(R"({"when": {}})"); }),
            "Attention config: priority[0] has no 'order' (the backends to try first)");
  EXPECT_THAT(
      error_message([] { rule_from(R"({"when": {"kv_cache_dtype": ["fp4"]}, "order": ["A"]})"); }),
      HasSubstr("priority[0]['when']['kv_cache_dtype'] 'fp4' is not valid. Valid "
                "values are:"));
  EXPECT_THAT(error_message([] {
                rule_from(R"({"when": {"gqa_ratio": {"min": 8, "max": 2}}, "order": ["A"]})");
              }),
              HasSubstr("priority[0]['when']['gqa_ratio'] is empty (min 8 > max 2)"));
  // Backend names go through the registry: unknown ones list the valid names.
  EXPECT_THAT(error_message([] {
                parse_attention_config(R"({"priority": [{"when": {}, "order": ["FLASHY"]}]})");
              }),
              HasSubstr("Unknown attention backend: 'FLASHY'. Valid options are:"));
}

TEST(PriorityFor, BuiltinRulesAreDataAndDependOnTheLayer) {
  BackendRegistry registry(BackendRegistry::Contents::kEmpty);
  testing::register_fake_builtins(registry);
  const PriorityDecision plain = priority_for(registry, cuda(9, 0), decoder());
  EXPECT_EQ(plain.rule, "cuda");
  EXPECT_FALSE(plain.from_config);
  EXPECT_THAT(plain.order, ElementsAre("CUDA_FLASH", "CUDA_PAGED"));
  const PriorityDecision mla = priority_for(registry, cuda(9, 0), testing::mla_layer());
  EXPECT_EQ(mla.rule, "cuda-mla");
  EXPECT_EQ(mla.condition, "platform=cuda, mla=true");
  EXPECT_THAT(mla.order, ElementsAre("CUDA_MLA", "CUDA_FLASH", "CUDA_PAGED"));
}

TEST(PriorityFor, AUserRuleLeadsAndTheBuiltinOrderFollowsWithoutRepeats) {
  BackendRegistry registry(BackendRegistry::Contents::kEmpty);
  testing::register_fake_builtins(registry);
  registry.register_backend("MY_CPU", testing::fake_factory("MY_CPU", testing::full_caps()));
  const std::vector<PriorityRule> rules = {
      rule_from(R"({"name": "wide-gqa", "when": {"gqa_ratio": {"min": 4}},
                    "order": ["MY_CPU", "REFERENCE"]})")};
  const PriorityDecision gqa = priority_for(registry, cpu(), gqa_layer(32, 8), rules);
  EXPECT_EQ(gqa.rule, "wide-gqa");
  EXPECT_TRUE(gqa.from_config);
  EXPECT_THAT(gqa.order, ElementsAre("MY_CPU", "REFERENCE", "CPU_FLASH"));
  // A layer the rule does not match keeps the built-in order (MY_CPU after it).
  const PriorityDecision mha = priority_for(registry, cpu(), gqa_layer(32, 32), rules);
  EXPECT_EQ(mha.rule, "cpu");
  EXPECT_THAT(mha.order, ElementsAre("CPU_FLASH", "REFERENCE", "MY_CPU"));
}

TEST(PriorityFor, SelectionFollowsTheRuleAndExplainShowsIt) {
  BackendRegistry registry(BackendRegistry::Contents::kEmpty);
  testing::register_fake_builtins(registry);
  const Selector selector(
      parse_attention_config(R"({"priority": [{"name": "gqa4", "when": {"gqa_ratio": {"min": 4}},
                                               "order": ["REFERENCE"]}]})",
                             registry),
      registry);
  const auto gqa = selector.select(gqa_layer(32, 8), cpu());
  EXPECT_EQ(gqa->backend, "REFERENCE");
  EXPECT_EQ(gqa->chosen_by, ChosenBy::kAuto);
  EXPECT_THAT(to_text(*gqa),
              HasSubstr("priority: config rule 'gqa4' (gqa_ratio >= 4): REFERENCE, CPU_FLASH"));
  const nlohmann::json j = to_json(*gqa);
  EXPECT_EQ(j["priority"]["rule"], "gqa4");
  EXPECT_EQ(j["priority"]["source"], "config");
  EXPECT_EQ(selector.select(gqa_layer(32, 32), cpu())->backend, "CPU_FLASH");
}

}  // namespace
}  // namespace attnkit
