// validate_capabilities(): one reason per unmet requirement, each naming the value.
#include "attnkit/backend/capabilities.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/fake_backend.h"

namespace attnkit {
namespace {

using testing::basic_caps;
using ::testing::ElementsAre;
using testing::full_caps;
using ::testing::IsEmpty;

Platform cpu() {
  Platform p;
  p.kind = PlatformKind::kCpu;
  return p;
}

Platform cuda(int major, int minor) {
  Platform p;
  p.kind = PlatformKind::kCuda;
  p.cc_major = major;
  p.cc_minor = minor;
  return p;
}

SelectorConfig plain() {
  SelectorConfig c;
  c.head_size = c.head_size_v = 128;
  return c;
}

std::vector<std::string> reasons(const BackendCapabilities& caps, const SelectorConfig& c,
                                 const Platform& p = cpu()) {
  return validate_capabilities(caps, c, p);
}

TEST(SizeRule, ExactList) {
  const SizeRule rule = SizeRule::list({256, 64, 128});
  EXPECT_TRUE(rule.allows(64));
  EXPECT_FALSE(rule.allows(96));
  EXPECT_EQ(rule.describe(), "64, 128, 256");
  EXPECT_EQ(rule.enumerate(100, 300), (std::vector<int>{128, 256}));
}

TEST(SizeRule, MultipleWithBounds) {
  const SizeRule rule = SizeRule::multiple(16, 32, 256);
  EXPECT_FALSE(rule.allows(16));
  EXPECT_TRUE(rule.allows(32));
  EXPECT_FALSE(rule.allows(40));
  EXPECT_TRUE(rule.allows(256));
  EXPECT_FALSE(rule.allows(272));
  EXPECT_EQ(rule.describe(), "multiples of 16 from 32 up to 256");
  EXPECT_EQ(SizeRule::multiple(8, 1, 256).describe(), "multiples of 8 up to 256");
  EXPECT_EQ(rule.enumerate(0, 80), (std::vector<int>{32, 48, 64, 80}));
  EXPECT_TRUE(SizeRule::any().allows(7));
  EXPECT_EQ(SizeRule::any().describe(), "any");
}

TEST(ValidateCapabilities, FullyCoveredConfigHasNoReasons) {
  EXPECT_THAT(reasons(full_caps(), plain()), IsEmpty());
  SelectorConfig everything = plain();
  everything.head_size_v = 64;
  everything.kv_cache_dtype = KvCacheDType::kFp8E5M2;
  everything.block_size = 48;
  everything.has_sinks = true;
  everything.sliding_window = 128;
  everything.chunk_size = 1024;
  everything.soft_cap = 50.0f;
  everything.batch_invariant = true;
  everything.kv_connector = true;
  EXPECT_THAT(reasons(full_caps(), everything), IsEmpty());
}

TEST(ValidateCapabilities, PlatformKind) {
  EXPECT_THAT(reasons(basic_caps(PlatformKind::kCpu), plain(), cuda(9, 0)),
              ElementsAre("runs on cpu, not on cuda:9.0"));
  EXPECT_THAT(reasons(basic_caps(PlatformKind::kCuda), plain(), cpu()),
              ElementsAre("runs on cuda, not on cpu"));
}

TEST(ValidateCapabilities, ComputeCapabilityRange) {
  BackendCapabilities caps = basic_caps(PlatformKind::kCuda);
  caps.min_compute_capability = 80;
  caps.max_compute_capability = 90;
  EXPECT_THAT(reasons(caps, plain(), cuda(7, 5)),
              ElementsAre("compute capability 7.5 is below the minimum 8.0"));
  EXPECT_THAT(reasons(caps, plain(), cuda(10, 0)),
              ElementsAre("compute capability 10.0 is above the maximum 9.0"));
  EXPECT_THAT(reasons(caps, plain(), cuda(8, 6)), IsEmpty());
  EXPECT_THAT(reasons(caps, plain(), cuda(9, 0)), IsEmpty());
}

TEST(ValidateCapabilities, Dtype) {
  BackendCapabilities caps = basic_caps();
  caps.dtypes = {DType::kFloat16, DType::kBFloat16};
  SelectorConfig c = plain();
  c.dtype = DType::kFloat32;
  EXPECT_THAT(reasons(caps, c),
              ElementsAre("dtype float32 not supported (supported: float16, bfloat16)"));
}

TEST(ValidateCapabilities, TheComputeDtypesOwnKvDtypeIsAlwaysAccepted) {
  BackendCapabilities caps = basic_caps();
  caps.kv_cache_dtypes = {KvCacheDType::kFp8E4M3};
  for (DType d : all_values<DType>()) {
    SCOPED_TRACE(std::string(to_string(d)));
    caps.dtypes = {d};
    SelectorConfig c = plain();
    c.dtype = d;
    // "auto" (a hand-built config) and what it resolves to are the same answer.
    c.kv_cache_dtype = KvCacheDType::kAuto;
    EXPECT_THAT(reasons(caps, c), IsEmpty());
    c.kv_cache_dtype = resolve_kv_cache_dtype(KvCacheDType::kAuto, d);
    EXPECT_THAT(reasons(caps, c), IsEmpty());
    c.kv_cache_dtype = KvCacheDType::kFp8E4M3;
    EXPECT_THAT(reasons(caps, c), IsEmpty());
  }
  SelectorConfig c = plain();
  caps.dtypes = {DType::kFloat16, DType::kBFloat16};
  c.dtype = DType::kFloat16;
  c.kv_cache_dtype = KvCacheDType::kFp8E5M2;
  EXPECT_THAT(reasons(caps, c), ElementsAre("kv_cache_dtype fp8_e5m2 not supported with dtype "
                                            "float16 (supported: float16, fp8_e4m3)"));
  c.kv_cache_dtype = KvCacheDType::kBFloat16;
  EXPECT_THAT(reasons(caps, c), ElementsAre("kv_cache_dtype bfloat16 not supported with dtype "
                                            "float16 (supported: float16, fp8_e4m3)"));
}

TEST(ValidateCapabilities, HeadSizes) {
  BackendCapabilities caps = basic_caps();
  caps.head_sizes = SizeRule::list({64, 128, 256});
  SelectorConfig c = plain();
  c.head_size = c.head_size_v = 96;
  EXPECT_THAT(reasons(caps, c),
              ElementsAre("head_size 96 not supported (supported: 64, 128, 256)"));
  c = plain();
  c.head_size_v = 64;
  EXPECT_THAT(reasons(caps, c),
              ElementsAre("head_size_v 64 differs from head_size 128, which is not supported"));
  caps.separate_v_head_size = true;
  EXPECT_THAT(reasons(caps, c), IsEmpty());
}

TEST(ValidateCapabilities, KernelBlockSizesAllowVirtualSplitting) {
  BackendCapabilities caps = basic_caps();
  caps.kernel_block_sizes = SizeRule::list({16});
  SelectorConfig c = plain();
  for (int ok : {16, 32, 64, 128}) {
    c.block_size = ok;
    EXPECT_THAT(reasons(caps, c), IsEmpty()) << ok;
  }
  c.block_size = 24;
  EXPECT_THAT(reasons(caps, c), ElementsAre("block_size 24 not supported (supported: 16)"));
  c.block_size = 8;
  EXPECT_THAT(reasons(caps, c), ElementsAre("block_size 8 not supported (supported: 16)"));
  caps.kernel_block_sizes = SizeRule::multiple(16);
  c.block_size = 48;
  EXPECT_THAT(reasons(caps, c), IsEmpty());
  EXPECT_TRUE(block_size_servable(SizeRule::list({32, 64}), 128));
  EXPECT_FALSE(block_size_servable(SizeRule::list({32, 64}), 16));
}

TEST(ValidateCapabilities, AttentionTypes) {
  BackendCapabilities caps = basic_caps();  // decoder only
  SelectorConfig c = plain();
  c.attn_type = AttentionType::kEncoderDecoder;
  EXPECT_THAT(reasons(caps, c),
              ElementsAre("attention type encoder_decoder not supported (supported: decoder)"));
  // A listed non-causal type still needs the non-causal capability.
  caps.attention_types.push_back(AttentionType::kEncoderOnly);
  c.attn_type = AttentionType::kEncoderOnly;
  EXPECT_THAT(reasons(caps, c), ElementsAre("non-causal (bidirectional) attention not supported"));
  caps.non_causal = true;
  EXPECT_THAT(reasons(caps, c), IsEmpty());
}

TEST(ValidateCapabilities, Mla) {
  BackendCapabilities caps = basic_caps();
  caps.separate_v_head_size = true;
  SelectorConfig mla = plain();
  mla.use_mla = true;
  EXPECT_THAT(reasons(caps, mla), ElementsAre("MLA not supported"));
  caps.mla = caps.mla_only = true;
  EXPECT_THAT(reasons(caps, mla), IsEmpty());
  EXPECT_THAT(reasons(caps, plain()),
              ElementsAre("serves only MLA layers, and this layer is not MLA"));
}

TEST(ValidateCapabilities, EachFeatureFlag) {
  const BackendCapabilities caps = basic_caps();
  SelectorConfig c = plain();
  c.sliding_window = 512;
  EXPECT_THAT(reasons(caps, c), ElementsAre("sliding window (512) not supported"));
  c = plain();
  c.chunk_size = 8192;
  EXPECT_THAT(reasons(caps, c), ElementsAre("chunked local attention (chunk 8192) not supported"));
  c = plain();
  c.has_sinks = true;
  EXPECT_THAT(reasons(caps, c), ElementsAre("attention sinks not supported"));
  c = plain();
  c.soft_cap = 30.0f;
  EXPECT_THAT(reasons(caps, c), ElementsAre("logit soft-capping (30) not supported"));
  c = plain();
  c.batch_invariant = true;
  EXPECT_THAT(reasons(caps, c), ElementsAre("batch invariance not supported"));
  c = plain();
  c.kv_connector = true;
  EXPECT_THAT(reasons(caps, c), ElementsAre("KV connector not supported"));
}

TEST(ValidateCapabilities, OneReasonPerUnmetRequirement) {
  BackendCapabilities caps = basic_caps(PlatformKind::kCuda);
  caps.dtypes = {DType::kBFloat16};
  caps.head_sizes = SizeRule::list({128});
  SelectorConfig c = plain();
  c.dtype = DType::kFloat16;
  c.head_size = c.head_size_v = 80;
  c.has_sinks = true;
  c.soft_cap = 50.0f;
  EXPECT_THAT(
      reasons(caps, c, cuda(7, 0)),
      ElementsAre("compute capability 7.0 is below the minimum 8.0",
                  "dtype float16 not supported (supported: bfloat16)",
                  "head_size 80 not supported (supported: 128)", "attention sinks not supported",
                  "logit soft-capping (50) not supported"));
}

TEST(BackendCapabilities, DescribeHasOneRowPerField) {
  BackendCapabilities caps = full_caps(PlatformKind::kCuda);
  caps.min_compute_capability = 80;
  caps.max_compute_capability = 90;
  caps.required_layout = KvLayout::kHND;
  caps.mla_only = true;
  const auto rows = caps.describe();
  std::map<std::string, std::string> by_field(rows.begin(), rows.end());
  EXPECT_EQ(by_field.size(), rows.size());
  EXPECT_EQ(by_field["platform"], "cuda (compute capability 8.0+ to 9.0)");
  EXPECT_EQ(by_field["dtypes"], "float32, float16, bfloat16");
  EXPECT_EQ(by_field["head_sizes"], "any (V head size may differ)");
  EXPECT_EQ(by_field["mla"], "only");
  EXPECT_EQ(by_field["kv_layout"], "HND");
  EXPECT_EQ(by_field["sinks"], "yes");
  for (const char* field : {"kv_cache_dtypes", "kernel_block_sizes", "preferred_block_size",
                            "attention_types", "sliding_window", "chunked_local", "soft_cap",
                            "non_causal", "batch_invariant", "kv_connector"}) {
    EXPECT_TRUE(by_field.count(field)) << field;
  }
  EXPECT_EQ(basic_caps().describe().front().second, "cpu");
}

}  // namespace
}  // namespace attnkit
