#include "attnkit/core/platform.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "attnkit/build_config.h"

namespace attnkit {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

TEST(Platform, ParsesCpuInAnyCase) {
  for (const char* text : {"cpu", "CPU", "Cpu"}) {
    const Platform p = parse_platform(text);
    EXPECT_EQ(p.kind, PlatformKind::kCpu);
    EXPECT_TRUE(p.is_local);
    EXPECT_EQ(p.to_string(), "cpu");
    EXPECT_EQ(p.compute_capability(), 0);
    EXPECT_TRUE(p.kernels_in_binary());
    EXPECT_EQ(p.kernels_in_binary_reason(), "");
  }
}

TEST(Platform, ParsesCudaComputeCapability) {
  const std::optional<Platform> local = local_cuda_platform();
  for (auto [text, major, minor] : {std::tuple{"cuda:9.0", 9, 0}, std::tuple{"CUDA:8.6", 8, 6},
                                    std::tuple{"cuda:12.0", 12, 0}, std::tuple{"cuda:7.5", 7, 5}}) {
    const Platform p = parse_platform(text);
    EXPECT_EQ(p.kind, PlatformKind::kCuda);
    EXPECT_EQ(p.cc_major, major);
    EXPECT_EQ(p.cc_minor, minor);
    EXPECT_EQ(p.compute_capability(), major * 10 + minor);
    EXPECT_EQ(p.to_string(), fmt::format("cuda:{}.{}", major, minor));
    // Described unless it is this machine's GPU.
    const bool is_this_gpu = local && local->cc_major == major && local->cc_minor == minor;
    EXPECT_EQ(p.is_local, is_this_gpu) << text;
  }
}

TEST(Platform, BadTextIsAnErrorListingTheValidForms) {
  for (const char* text : {"", "gpu", "cuda:", "cuda:9", "cuda:x.y", "cuda:9.10", "cuda:0.0",
                           "cuda:9.0.1", "cuda:9.0 ", " cpu", "cuda:-1.0", "rocm:9.0"}) {
    try {
      parse_platform(text);
      ADD_FAILURE() << "expected Error for '" << text << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << text;
      EXPECT_THAT(e.what(), StartsWith(fmt::format("Invalid platform '{}'", text)));
      EXPECT_THAT(e.what(), HasSubstr("Valid forms are: cpu, cuda, cuda:MAJOR.MINOR"));
    }
  }
}

TEST(Platform, BareCudaNeedsALocalGpu) {
  if (local_cuda_platform()) {
    const Platform p = parse_platform("cuda");
    EXPECT_TRUE(p.is_local);
    EXPECT_EQ(p.kind, PlatformKind::kCuda);
    EXPECT_FALSE(p.device_name.empty());
    return;
  }
  try {
    parse_platform("cuda");
    FAIL() << "expected Error without a GPU";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_THAT(e.what(), HasSubstr("e.g. cuda:9.0"));
  }
}

TEST(Platform, KernelsInBinaryFollowTheBuild) {
  const std::vector<int> archs = cuda_architectures_in_binary();
  EXPECT_EQ(archs.empty(), ATTNKIT_HAS_CUDA == 0);
  Platform old_gpu;
  old_gpu.kind = PlatformKind::kCuda;
  old_gpu.cc_major = 5;
  old_gpu.cc_minor = 0;
  if (!ATTNKIT_HAS_CUDA) {
    EXPECT_FALSE(old_gpu.kernels_in_binary());
    EXPECT_EQ(old_gpu.kernels_in_binary_reason(), "CUDA kernels are not built into this binary");
    EXPECT_EQ(parse_platform("cuda:9.0").kernels_in_binary_reason(),
              "CUDA kernels are not built into this binary");
    return;
  }
  for (int arch : archs) {
    const Platform p = parse_platform(fmt::format("cuda:{}.{}", arch / 10, arch % 10));
    EXPECT_TRUE(p.kernels_in_binary()) << arch;
  }
  EXPECT_FALSE(old_gpu.kernels_in_binary());
  EXPECT_THAT(old_gpu.kernels_in_binary_reason(), HasSubstr("no kernels for sm_50"));
}

TEST(CpuFeatures, NamesListThePresentFeaturesInOrder) {
  CpuFeatures none;
  EXPECT_TRUE(none.names().empty());
  CpuFeatures some;
  some.avx2 = true;
  some.fma = true;
  some.avx512f = true;
  some.avx512_bf16 = true;
  EXPECT_THAT(some.names(), ElementsAre("avx2", "fma", "avx512f", "avx512_bf16"));
}

TEST(CpuFeatures, LocalCpuPlatformCarriesTheDetectedFeatures) {
  const CpuFeatures detected = detect_cpu_features();
  EXPECT_EQ(cpu_platform().cpu.names(), detected.names());
  // AVX-512 sub-features are only reported with AVX-512F.
  if (!detected.avx512f) {
    EXPECT_FALSE(detected.avx512bw || detected.avx512vl || detected.avx512dq ||
                 detected.avx512_bf16 || detected.avx512_fp16);
  }
}

}  // namespace
}  // namespace attnkit
