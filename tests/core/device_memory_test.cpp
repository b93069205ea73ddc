// DeviceBuffer over host memory: ownership, growth and moves (the CUDA implementation is
// exercised by the GPU suites).

#include "attnkit/core/device_memory.h"

#include <gtest/gtest.h>

#include <cstring>
#include <utility>

#include "attnkit/core/error.h"

namespace attnkit {
namespace {

TEST(DeviceBuffer, ReserveGrowsAndNeverShrinks) {
  auto memory = make_host_memory();
  DeviceBuffer buffer(*memory);
  EXPECT_EQ(buffer.data(), nullptr);
  buffer.reserve(100);
  ASSERT_NE(buffer.data(), nullptr);
  EXPECT_EQ(buffer.size(), 100u);
  std::memset(buffer.data(), 0x5a, 100);  // the whole reserved range is writable
  void* const first = buffer.data();
  buffer.reserve(64);  // smaller: kept as it is
  EXPECT_EQ(buffer.data(), first);
  EXPECT_EQ(buffer.size(), 100u);
  buffer.reserve(4096);
  EXPECT_EQ(buffer.size(), 4096u);
  std::memset(buffer.data(), 0x11, 4096);
}

TEST(DeviceBuffer, MoveTransfersOwnership) {
  auto memory = make_host_memory();
  DeviceBuffer a(*memory, 256);
  void* const data = a.data();
  DeviceBuffer b(std::move(a));
  EXPECT_EQ(b.data(), data);
  EXPECT_EQ(b.size(), 256u);
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): the moved-from state
  DeviceBuffer c(*memory, 8);
  c = std::move(b);
  EXPECT_EQ(c.data(), data);
}

TEST(DeviceBuffer, ReserveWithoutMemoryIsAnError) {
  DeviceBuffer buffer;
  EXPECT_THROW(buffer.reserve(16), Error);
}

TEST(DeviceMemory, CudaOnAMachineWithoutItSaysWhy) {
  try {
    auto memory = make_cuda_memory(1000);
    FAIL() << "device 1000 exists";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("1000"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attnkit
