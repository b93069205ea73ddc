// Host memory for streamed buffers (core/host_memory.h): the alignment asked for, 2 MiB
// alignment and the kernel's huge-page advice (the "hg" flag of the mapping in
// /proc/self/smaps) from 2 MiB on, none with ATTNKIT_HUGE_PAGES off or below 2 MiB, and the
// errors a caller can hit.

#include "attnkit/core/host_memory.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>

#include "attnkit/core/error.h"

namespace attnkit {
namespace {

// Under a sanitizer, malloc hands out memory from the sanitizer's own regions, which keep
// the advice of an earlier (freed) buffer: only glibc's fresh mappings can show that a
// buffer was *not* advised.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kFreshMappings = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kFreshMappings = false;
#else
constexpr bool kFreshMappings = true;
#endif
#else
constexpr bool kFreshMappings = true;
#endif

struct Free {
  void operator()(void* p) const { std::free(p); }
};
using Buffer = std::unique_ptr<void, Free>;

// The VmFlags of the mapping holding `p` in /proc/self/smaps; nullopt where there is none.
std::optional<std::string> mapping_flags(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  if (!smaps) return std::nullopt;
  const auto at = reinterpret_cast<uintptr_t>(p);
  bool inside = false;
  std::string line;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> lo >> dash >> hi && dash == '-' && line.find(':') > line.find(' ')) {
      inside = lo <= at && at < hi;
    } else if (inside && line.rfind("VmFlags:", 0) == 0) {
      return line;
    }
  }
  return std::nullopt;
}

bool has_flag(const std::string& flags, const std::string& flag) {
  std::istringstream words(flags.substr(flags.find(':') + 1));
  std::string w;
  while (words >> w) {
    if (w == flag) return true;
  }
  return false;
}

class HostMemory : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(unsetenv("ATTNKIT_HUGE_PAGES"), 0); }
  void TearDown() override { unsetenv("ATTNKIT_HUGE_PAGES"); }
};

TEST_F(HostMemory, SmallBuffersHaveTheAlignmentAskedFor) {
  for (size_t align : {size_t{64}, size_t{256}, size_t{4096}}) {
    const Buffer b(allocate_streamed_host_memory(1000, align));
    ASSERT_NE(b.get(), nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.get()) % align, 0u) << align;
    std::memset(b.get(), 1, 1000);
  }
  const Buffer empty(allocate_streamed_host_memory(0));
  EXPECT_NE(empty.get(), nullptr);
}

TEST_F(HostMemory, LargeBuffersAreAdvisedForHugePages) {
  if (!streamed_host_memory_uses_huge_pages()) {
    GTEST_SKIP() << "no madvise(MADV_HUGEPAGE) on this system";
  }
  if (!std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled")) {
    GTEST_SKIP() << "this kernel has no transparent huge pages (the advice is refused)";
  }
  const size_t bytes = 3 * kHugePageBytes + 12345;
  const Buffer b(allocate_streamed_host_memory(bytes, 256));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b.get()) % kHugePageBytes, 0u);
  std::memset(b.get(), 7, bytes);
  const std::optional<std::string> flags = mapping_flags(b.get());
  ASSERT_TRUE(flags.has_value()) << "no mapping of the buffer in /proc/self/smaps";
  EXPECT_TRUE(has_flag(*flags, "hg")) << *flags;
  // The advice covers the whole buffer: its last byte lies in an advised mapping too.
  const std::optional<std::string> last = mapping_flags(static_cast<char*>(b.get()) + bytes - 1);
  ASSERT_TRUE(last.has_value());
  EXPECT_TRUE(has_flag(*last, "hg")) << *last;
}

TEST_F(HostMemory, TheSwitchTurnsTheAdviceOff) {
  ASSERT_EQ(setenv("ATTNKIT_HUGE_PAGES", "off", 1), 0);
  EXPECT_FALSE(streamed_host_memory_uses_huge_pages());
  const Buffer b(allocate_streamed_host_memory(3 * kHugePageBytes, 256));
  ASSERT_NE(b.get(), nullptr);
  std::memset(b.get(), 7, 3 * kHugePageBytes);
  if (const std::optional<std::string> flags = mapping_flags(b.get()); flags && kFreshMappings) {
    EXPECT_FALSE(has_flag(*flags, "hg")) << *flags;
  }
  ASSERT_EQ(setenv("ATTNKIT_HUGE_PAGES", "sometimes", 1), 0);
  try {
    (void)streamed_host_memory_uses_huge_pages();
    ADD_FAILURE() << "a bad switch value was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ATTNKIT_HUGE_PAGES=sometimes"), std::string::npos)
        << e.what();
  }
}

TEST_F(HostMemory, BuffersBelowAHugePageAreNotAdvised) {
  const Buffer b(allocate_streamed_host_memory(kHugePageBytes / 2, 256));
  std::memset(b.get(), 7, kHugePageBytes / 2);
  if (const std::optional<std::string> flags = mapping_flags(b.get()); flags && kFreshMappings) {
    EXPECT_FALSE(has_flag(*flags, "hg")) << *flags;
  }
}

TEST_F(HostMemory, RejectsAnAlignmentThatIsNotAPowerOfTwo) {
  for (size_t align : {size_t{0}, size_t{48}, size_t{1000}}) {
    try {
      Buffer b(allocate_streamed_host_memory(100, align));
      ADD_FAILURE() << "alignment " << align << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(std::to_string(align)), std::string::npos) << e.what();
    }
  }
}

TEST_F(HostMemory, ASizeThatWouldWrapAroundIsOutOfMemory) {
  // Rounded up to the alignment (or to whole huge pages) these would wrap past zero.
  for (size_t bytes : {SIZE_MAX, SIZE_MAX - 100, SIZE_MAX - kHugePageBytes + 2}) {
    try {
      Buffer b(allocate_streamed_host_memory(bytes, 256));
      ADD_FAILURE() << bytes << " bytes were allocated";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
      EXPECT_NE(std::string(e.what()).find(std::to_string(bytes)), std::string::npos) << e.what();
    }
  }
}

TEST_F(HostMemory, AnImpossibleSizeIsOutOfMemory) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer aborts on an impossible allocation instead of failing it";
#else
  try {
    Buffer b(allocate_streamed_host_memory(size_t{1} << 62, 256));
    ADD_FAILURE() << "2^62 bytes were allocated";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
  }
#endif
}

}  // namespace
}  // namespace attnkit
