#include "attnkit/core/host_memory.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "attnkit/core/error.h"
#include "attnkit/core/options.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace attnkit {

bool streamed_host_memory_uses_huge_pages() {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  return option_switch(Option::kHugePages).value_or(true);
#else
  return false;
#endif
}

void* allocate_streamed_host_memory(size_t bytes, size_t align) {
  if (align == 0 || (align & (align - 1)) != 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("host memory alignment {} is not a power of two", align));
  }
  const bool huge = bytes >= kHugePageBytes && streamed_host_memory_uses_huge_pages();
  const size_t a = huge ? std::max(align, kHugePageBytes) : align;
  // Rounding up must not wrap around (a request near SIZE_MAX would become a tiny buffer).
  const size_t rounded = bytes <= SIZE_MAX - a ? (std::max<size_t>(bytes, 1) + a - 1) / a * a : 0;
  void* p = rounded != 0 ? std::aligned_alloc(a, rounded) : nullptr;
  if (p == nullptr) {
    throw Error(ErrorCode::kOutOfMemory,
                fmt::format("cannot allocate {} bytes of host memory", bytes));
  }
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // Advice: where the kernel has no transparent huge pages the call fails and the buffer
  // keeps its 4 KiB pages, which is all that can be had there.
  if (huge) (void)madvise(p, rounded, MADV_HUGEPAGE);
#endif
  return p;
}

}  // namespace attnkit
