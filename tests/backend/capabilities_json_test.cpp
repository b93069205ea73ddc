// to_json() of capabilities: data a program compares against, not sentences.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "attnkit/backend/capabilities.h"
#include "support/fake_backend.h"

namespace attnkit {
namespace {

using nlohmann::json;

TEST(CapabilitiesJson, SizeRuleListIsItsSortedValues) {
  EXPECT_EQ(to_json(SizeRule::list({256, 64, 128})), json({{"values", {64, 128, 256}}}));
}

TEST(CapabilitiesJson, SizeRuleMultipleHasItsBoundsAndNullWhenUnbounded) {
  EXPECT_EQ(to_json(SizeRule::multiple(16, 32, 256)),
            json({{"multiple_of", 16}, {"min", 32}, {"max", 256}}));
  EXPECT_EQ(to_json(SizeRule::multiple(8)),
            json({{"multiple_of", 8}, {"min", 1}, {"max", nullptr}}));
  EXPECT_EQ(to_json(SizeRule::any()), json({{"multiple_of", 1}, {"min", 1}, {"max", nullptr}}));
}

TEST(CapabilitiesJson, EveryFieldTypedOnCpu) {
  BackendCapabilities caps = testing::full_caps();
  caps.head_sizes = SizeRule::list({64, 128});
  caps.kernel_block_sizes = SizeRule::multiple(16);
  caps.preferred_block_size = 32;
  caps.required_layout = KvLayout::kHND;
  const json j = to_json(caps);
  EXPECT_EQ(j["platform"], "cpu");
  EXPECT_TRUE(j["compute_capability"].is_null());
  EXPECT_EQ(j["dtypes"], json({"float32", "float16", "bfloat16"}));
  EXPECT_EQ(j["kv_cache_dtypes"].size(), caps.kv_cache_dtypes.size());
  // full_caps() lists the concrete KV dtypes (no "auto": it is resolved before selection).
  EXPECT_EQ(j["kv_cache_dtypes"][3], "fp8_e4m3");
  EXPECT_EQ(j["head_sizes"], json({{"values", {64, 128}}}));
  EXPECT_EQ(j["kernel_block_sizes"]["multiple_of"], 16);
  EXPECT_EQ(j["preferred_block_size"], 32);
  EXPECT_EQ(j["attention_types"], json({"decoder", "encoder", "encoder_only", "encoder_decoder"}));
  for (const char* flag : {"separate_v_head_size", "mla", "sliding_window", "chunked_local",
                           "sinks", "soft_cap", "non_causal", "batch_invariant", "kv_connector"}) {
    EXPECT_EQ(j[flag], true) << flag;
  }
  EXPECT_EQ(j["mla_only"], false);
  EXPECT_EQ(j["kv_layout"], "HND");
  EXPECT_EQ(j["kv_layout_required"], true);
}

TEST(CapabilitiesJson, CudaComputeCapabilityRangeAsNumbers) {
  BackendCapabilities caps = testing::basic_caps(PlatformKind::kCuda);
  caps.max_compute_capability = 90;
  json j = to_json(caps);
  EXPECT_EQ(j["platform"], "cuda");
  EXPECT_EQ(j["compute_capability"],
            json({{"min", {{"major", 8}, {"minor", 0}}}, {"max", {{"major", 9}, {"minor", 0}}}}));
  EXPECT_EQ(j["kv_layout"], "NHD");
  EXPECT_EQ(j["kv_layout_required"], false);
  caps.min_compute_capability = 89;
  caps.max_compute_capability = 0;
  j = to_json(caps);
  EXPECT_EQ(j["compute_capability"]["min"], json({{"major", 8}, {"minor", 9}}));
  EXPECT_TRUE(j["compute_capability"]["max"].is_null());
}

}  // namespace
}  // namespace attnkit
