// The CUDA backends' declared capabilities and binary checks (CPU only, runs in CI).

#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "attnkit/build_config.h"
#include "attnkit/core/error.h"
#include "attnkit/core/platform.h"
#include "backends/cuda_flash/cuda_flash_backend.h"
#include "backends/cuda_paged/cuda_paged_backend.h"

namespace attnkit {
namespace {

bool mentions(const std::vector<std::string>& reasons, const std::string& text) {
  for (const auto& r : reasons) {
    if (r.find(text) != std::string::npos) return true;
  }
  return false;
}

TEST(CudaCapabilities, NamesAndPlatform) {
  const auto flash = make_cuda_flash_backend();
  const auto paged = make_cuda_paged_backend();
  EXPECT_EQ(flash->name(), "CUDA_FLASH");
  EXPECT_EQ(paged->name(), "CUDA_PAGED");
  EXPECT_EQ(flash->capabilities().platform, PlatformKind::kCuda);
  EXPECT_EQ(paged->capabilities().min_compute_capability, 80);
}

TEST(CudaCapabilities, FlashServesItsHeadSizesOnHopperAndAmpere) {
  const auto flash = make_cuda_flash_backend();
  for (const char* platform : {"cuda:8.0", "cuda:9.0"}) {
    for (int head : {64, 128, 256}) {
      SelectorConfig c;
      c.head_size = c.head_size_v = head;
      c.num_heads = 32;
      c.num_kv_heads = 8;
      EXPECT_TRUE(flash->validate(c, parse_platform(platform)).empty()) << platform << " " << head;
    }
  }
  SelectorConfig c;
  c.head_size = c.head_size_v = 96;
  EXPECT_TRUE(mentions(flash->validate(c, parse_platform("cuda:9.0")), "96"));
}

TEST(CudaCapabilities, FlashTakesFp8AndRejectsMismatchedKvDtypeAndPreAmpere) {
  const auto flash = make_cuda_flash_backend();
  SelectorConfig c;
  for (KvCacheDType fp8 : {KvCacheDType::kFp8E4M3, KvCacheDType::kFp8E5M2}) {
    c.kv_cache_dtype = fp8;  // converted to the compute dtype after each tile load
    EXPECT_TRUE(flash->validate(c, parse_platform("cuda:9.0")).empty()) << to_string(fp8);
    EXPECT_TRUE(flash->validate(c, parse_platform("cuda:8.0")).empty()) << to_string(fp8);
  }
  c.kv_cache_dtype = KvCacheDType::kFloat16;  // compute dtype is bf16
  EXPECT_TRUE(mentions(flash->validate(c, parse_platform("cuda:9.0")), "kv_cache_dtype"));
  c.kv_cache_dtype = KvCacheDType::kBFloat16;
  EXPECT_TRUE(flash->validate(c, parse_platform("cuda:9.0")).empty());
  c.kv_cache_dtype = KvCacheDType::kAuto;
  EXPECT_FALSE(flash->validate(c, parse_platform("cuda:7.5")).empty());
  EXPECT_FALSE(flash->validate(c, parse_platform("cpu")).empty());
}

TEST(CudaCapabilities, PagedServesBroadFeatures) {
  const auto paged = make_cuda_paged_backend();
  const Platform h200 = parse_platform("cuda:9.0");
  for (int head : {16, 48, 80, 96, 112, 128, 192, 256}) {
    SelectorConfig c;
    c.head_size = c.head_size_v = head;
    c.kv_cache_dtype = KvCacheDType::kFp8E5M2;
    c.has_sinks = true;
    c.sliding_window = 128;
    c.soft_cap = 30.0f;
    EXPECT_TRUE(paged->validate(c, h200).empty()) << head;
  }
  SelectorConfig chunked;
  chunked.chunk_size = 8192;
  EXPECT_TRUE(paged->validate(chunked, h200).empty());
  for (AttentionType t :
       {AttentionType::kEncoder, AttentionType::kEncoderOnly, AttentionType::kEncoderDecoder}) {
    SelectorConfig c;
    c.attn_type = t;
    EXPECT_TRUE(paged->validate(c, h200).empty()) << to_string(t);
  }
  SelectorConfig odd;
  odd.head_size = odd.head_size_v = 72;  // not a multiple of 16
  EXPECT_TRUE(mentions(paged->validate(odd, h200), "72"));
  SelectorConfig big;
  big.head_size = big.head_size_v = 288;
  EXPECT_FALSE(paged->validate(big, h200).empty());
  SelectorConfig mla;
  mla.use_mla = true;
  mla.head_size = 576;
  mla.head_size_v = 512;
  EXPECT_FALSE(paged->validate(mla, h200).empty());
  SelectorConfig fp32;
  fp32.dtype = DType::kFloat32;
  EXPECT_FALSE(paged->validate(fp32, h200).empty());
}

TEST(CudaCapabilities, GqaRatioMustBeWhole) {
  const auto flash = make_cuda_flash_backend();
  SelectorConfig c;
  c.num_heads = 12;
  c.num_kv_heads = 5;
  EXPECT_TRUE(mentions(flash->validate(c, parse_platform("cuda:9.0")), "num_kv_heads"));
}

TEST(CudaCapabilities, BinaryReasonFollowsTheBuild) {
  const auto flash = make_cuda_flash_backend();
  const auto paged = make_cuda_paged_backend();
  // No build carries sm_75 kernels: the reason names the architecture.
  const auto turing = flash->binary_reason(parse_platform("cuda:7.5"));
  ASSERT_TRUE(turing.has_value());
#if ATTNKIT_HAS_CUDA
  EXPECT_NE(turing->find("75"), std::string::npos) << *turing;
  // Every architecture of this build runs; sm_80 is refused by a build without it (sm_90
  // kernels cannot run on an older GPU), naming it. (A build for sm_80 alone may still run
  // on sm_90 through PTX: no claim is made there.)
  const std::string built = ATTNKIT_CUDA_ARCHITECTURES;
  const auto in_build = [&](const std::string& arch) {
    return (";" + built + ";").find(";" + arch) != std::string::npos;
  };
  for (const auto& [arch, platform] : {std::pair{"90", "cuda:9.0"}, {"80", "cuda:8.0"}}) {
    for (const AttentionBackend* backend : {flash.get(), paged.get()}) {
      const auto reason = backend->binary_reason(parse_platform(platform));
      if (in_build(arch)) {
        EXPECT_FALSE(reason.has_value()) << built << ": " << *reason;
      } else if (std::string(arch) == "80") {
        ASSERT_TRUE(reason.has_value()) << built << " on " << platform;
        EXPECT_NE(reason->find(arch), std::string::npos) << *reason;
      }
    }
  }
#else
  EXPECT_NE(turing->find("not built"), std::string::npos) << *turing;
  const auto hopper = paged->binary_reason(parse_platform("cuda:9.0"));
  ASSERT_TRUE(hopper.has_value());
  EXPECT_NE(hopper->find("not built"), std::string::npos);
  AttentionLayerParams layer;
  layer.num_heads = layer.num_kv_heads = 1;
  layer.head_size = layer.head_size_v = 128;
  try {
    paged->make_impl(layer);
    FAIL() << "a build without CUDA made a CUDA_PAGED implementation";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("not built into this binary"), std::string::npos);
  }
  EXPECT_THROW(flash->make_builder(KvCacheSpec{}, layer), Error);
#endif
}

}  // namespace
}  // namespace attnkit
