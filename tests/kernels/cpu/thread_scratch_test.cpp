// cpu::thread_scratch: one buffer per thread, 64-byte aligned, kept (with its contents)
// across calls, grown when a call asks for more, and nullptr (not an exception) when the
// memory cannot be had, after which the thread can still get a buffer of a possible size.

#include "kernels/cpu/thread_scratch.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>

namespace attnkit::cpu {
namespace {

TEST(ThreadScratch, IsAlignedKeptAcrossCallsAndGrown) {
  float* a = thread_scratch(1000);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 64, 0u);
  for (int i = 0; i < 1000; ++i) a[i] = static_cast<float>(i) + 0.5f;
  // A call that needs no more gets the same memory, contents untouched.
  float* b = thread_scratch(10);
  EXPECT_EQ(b, a);
  EXPECT_EQ(b[999], 999.5f);
  // One that needs more gets a buffer of that size, aligned, every float writable.
  const int64_t big = int64_t{1} << 22;
  float* c = thread_scratch(big);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(c) % 64, 0u);
  for (int64_t i = 0; i < big; i += 1024) c[i] = 1.0f;
  c[big - 1] = 2.0f;
  EXPECT_EQ(thread_scratch(big), c);
}

TEST(ThreadScratch, EachThreadHasItsOwn) {
  float* mine = thread_scratch(256);
  ASSERT_NE(mine, nullptr);
  mine[0] = 1.0f;
  float* theirs = nullptr;
  std::thread other([&] {
    theirs = thread_scratch(256);
    if (theirs != nullptr) theirs[0] = 2.0f;
  });
  other.join();
  ASSERT_NE(theirs, nullptr);
  EXPECT_NE(theirs, mine);
  EXPECT_EQ(mine[0], 1.0f);
}

TEST(ThreadScratch, AnImpossibleSizeGivesNullAndTheThreadRecovers) {
#if defined(__SANITIZE_ADDRESS__)
  // ASan's allocator reports an impossible size as an error instead of returning null.
  GTEST_SKIP() << "AddressSanitizer aborts on allocations it cannot make";
#endif
  EXPECT_EQ(thread_scratch(int64_t{1} << 60), nullptr);  // 4 EiB
  float* p = thread_scratch(4096);
  ASSERT_NE(p, nullptr);
  p[4095] = 3.0f;
  EXPECT_EQ(p[4095], 3.0f);
}

}  // namespace
}  // namespace attnkit::cpu
