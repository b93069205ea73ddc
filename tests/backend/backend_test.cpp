// The defaults AttentionBackend gives every backend: validate() = capabilities + the
// combination hook, binary_reason() from the platform for CUDA backends, KV layout,
// preferred block size and customize_spec().
#include "attnkit/backend/backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "support/fake_backend.h"

namespace attnkit {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A backend that keeps every default of AttentionBackend.
class DefaultsBackend : public AttentionBackend {
 public:
  explicit DefaultsBackend(BackendCapabilities caps) : caps_(std::move(caps)) {}
  std::string_view name() const override { return "DEFAULTS"; }
  std::string_view description() const override { return "defaults"; }
  const BackendCapabilities& capabilities() const override { return caps_; }
  std::unique_ptr<MetadataBuilder> make_builder(const KvCacheSpec&,
                                                const AttentionLayerParams&) const override {
    return nullptr;
  }
  std::unique_ptr<AttentionImpl> make_impl(const AttentionLayerParams&) const override {
    return nullptr;
  }

 private:
  BackendCapabilities caps_;
};

Platform cuda(int major, int minor) {
  Platform p;
  p.kind = PlatformKind::kCuda;
  p.cc_major = major;
  p.cc_minor = minor;
  return p;
}

TEST(AttentionBackend, ValidateAddsCombinationReasonsAfterCapabilityReasons) {
  testing::FakeBackend backend("HOOKED", testing::basic_caps());
  backend.with_combination_hook([](const SelectorConfig& c, const Platform&) {
    std::vector<std::string> reasons;
    if (c.head_size == 256 && c.dtype == DType::kFloat32) {
      reasons.push_back("float32 with head_size 256 needs too many registers");
    }
    return reasons;
  });
  SelectorConfig c;
  c.head_size = c.head_size_v = 256;
  EXPECT_THAT(backend.validate(c, Platform{}), IsEmpty());
  c.dtype = DType::kFloat32;
  c.has_sinks = true;
  EXPECT_THAT(backend.validate(c, Platform{}),
              ElementsAre("attention sinks not supported",
                          "float32 with head_size 256 needs too many registers"));
}

TEST(AttentionBackend, BinaryReasonIsNoneForCpuBackends) {
  DefaultsBackend cpu_backend(testing::basic_caps(PlatformKind::kCpu));
  EXPECT_FALSE(cpu_backend.binary_reason(Platform{}).has_value());
  EXPECT_FALSE(cpu_backend.binary_reason(cuda(9, 0)).has_value());
}

TEST(AttentionBackend, BinaryReasonOfCudaBackendsComesFromThePlatform) {
  DefaultsBackend gpu(testing::basic_caps(PlatformKind::kCuda));
  for (const Platform& p : {cuda(9, 0), cuda(8, 0), cuda(7, 0), cuda(12, 0)}) {
    const std::string why = p.kernels_in_binary_reason();
    const std::optional<std::string> reason = gpu.binary_reason(p);
    EXPECT_EQ(reason.has_value(), !why.empty()) << p.to_string();
    if (reason) {
      EXPECT_EQ(*reason, why);
    }
  }
}

TEST(AttentionBackend, LayoutPreferredBlockSizeAndSpecDefaults) {
  BackendCapabilities caps = testing::basic_caps();
  caps.preferred_block_size = 64;
  DefaultsBackend nhd(caps);
  EXPECT_EQ(nhd.kv_layout(), KvLayout::kNHD);
  KvCacheSpec spec;
  spec.num_kv_heads = 8;
  spec.head_size = spec.head_size_v = 128;
  EXPECT_EQ(nhd.preferred_block_size(spec), 64);
  EXPECT_EQ(nhd.customize_spec(spec), spec);
  caps.required_layout = KvLayout::kHND;
  EXPECT_EQ(DefaultsBackend(caps).kv_layout(), KvLayout::kHND);
}

TEST(KvCacheSpec, BytesPerTokenAndPageSize) {
  KvCacheSpec spec;
  spec.num_kv_heads = 8;
  spec.head_size = spec.head_size_v = 128;
  spec.dtype = ScalarType::kBFloat16;
  spec.block_size = 16;
  EXPECT_EQ(spec.bytes_per_token(), 8u * 256u * 2u);
  EXPECT_EQ(spec.page_size_bytes(), 16u * 8u * 256u * 2u);
  EXPECT_EQ(spec.describe(), "full_attention 8x128+128 bfloat16 block 16");
  KvCacheSpec mla;
  mla.kind = KvCacheKind::kMlaAttention;
  mla.num_kv_heads = 1;
  mla.head_size = 576;
  mla.head_size_v = 0;
  mla.dtype = ScalarType::kFp8E4M3;
  EXPECT_EQ(mla.bytes_per_token(), 576u);
  KvCacheSpec encoder = spec;
  encoder.kind = KvCacheKind::kEncoderOnlyAttention;
  EXPECT_FALSE(encoder.has_cache());
  EXPECT_EQ(encoder.page_size_bytes(), 0u);
}

}  // namespace
}  // namespace attnkit
