#include "attnkit/selector/priority.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_registry.h"

namespace attnkit {
namespace {

using testing::cpu;
using testing::cuda;
using testing::decoder;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using testing::mla_layer;

TEST(BuiltinPriority, PerPlatformLists) {
  EXPECT_THAT(builtin_priority(PlatformKind::kCpu, false), ElementsAre("CPU_FLASH", "REFERENCE"));
  EXPECT_THAT(builtin_priority(PlatformKind::kCpu, true),
              ElementsAre("CPU_MLA", "CPU_FLASH", "REFERENCE"));
  EXPECT_THAT(builtin_priority(PlatformKind::kCuda, false),
              ElementsAre("CUDA_FLASH", "CUDA_PAGED"));
  EXPECT_THAT(builtin_priority(PlatformKind::kCuda, true),
              ElementsAre("CUDA_MLA", "CUDA_FLASH", "CUDA_PAGED"));
}

TEST(PriorityList, SkipsNamesThatAreNotRegistered) {
  BackendRegistry registry(BackendRegistry::Contents::kEmpty);
  EXPECT_THAT(priority_list(registry, cpu(), decoder()), IsEmpty());
  registry.register_backend("REFERENCE", testing::fake_factory("REFERENCE", testing::full_caps()));
  EXPECT_THAT(priority_list(registry, cpu(), decoder()), ElementsAre("REFERENCE"));
  EXPECT_THAT(priority_list(registry, cuda(9, 0), decoder()), IsEmpty());
}

TEST(PriorityList, RegisteredBackendsFollowBuiltinsOnTheirOwnPlatform) {
  BackendRegistry registry(BackendRegistry::Contents::kEmpty);
  registry.register_backend("MY_CPU", testing::fake_factory("MY_CPU", testing::full_caps()));
  registry.register_backend(
      "MY_GPU", testing::fake_factory("MY_GPU", testing::full_caps(PlatformKind::kCuda)));
  testing::register_fake_builtins(registry);
  EXPECT_THAT(priority_list(registry, cpu(), decoder()),
              ElementsAre("CPU_FLASH", "REFERENCE", "MY_CPU"));
  EXPECT_THAT(priority_list(registry, cuda(9, 0), decoder()),
              ElementsAre("CUDA_FLASH", "CUDA_PAGED", "MY_GPU"));
  EXPECT_THAT(priority_list(registry, cuda(8, 0), mla_layer()),
              ElementsAre("CUDA_MLA", "CUDA_FLASH", "CUDA_PAGED", "MY_GPU"));
}

TEST(PlatformReasons, WrongPlatformKind) {
  testing::FakeBackend cpu_backend("C", testing::basic_caps(PlatformKind::kCpu));
  EXPECT_THAT(platform_reasons(cpu_backend, cuda(9, 0)),
              ElementsAre("runs on cpu, not on cuda:9.0"));
  EXPECT_THAT(platform_reasons(cpu_backend, cpu()), IsEmpty());
}

TEST(PlatformReasons, ComputeCapabilityRange) {
  testing::FakeBackend gpu("G", testing::cuda_flash_caps());  // 8.0 to 9.0
  EXPECT_THAT(platform_reasons(gpu, cuda(7, 5), false),
              ElementsAre("compute capability 7.5 is below the minimum 8.0"));
  EXPECT_THAT(platform_reasons(gpu, cuda(10, 0), false),
              ElementsAre("compute capability 10.0 is above the maximum 9.0"));
  EXPECT_THAT(platform_reasons(gpu, cuda(8, 9), false), IsEmpty());
}

TEST(PlatformReasons, BinaryReasonOnlyWhenAsked) {
  testing::FakeBackend gpu("G", testing::cuda_paged_caps());
  gpu.with_binary_reason("not in this binary");
  EXPECT_THAT(platform_reasons(gpu, cuda(9, 0)), ElementsAre("not in this binary"));
  EXPECT_THAT(platform_reasons(gpu, cuda(9, 0), /*include_binary=*/false), IsEmpty());
}

}  // namespace
}  // namespace attnkit
