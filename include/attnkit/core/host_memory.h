#pragma once
// Host memory for the large buffers CPU kernels stream through: the host KV cache
// (HostKvMemoryAllocator) and, in the benchmarks, the caches they time and the buffer of
// the read-bandwidth ceiling, so that a kernel and its ceiling read through the same kind
// of pages.

#include <cstddef>

#include "attnkit/export.h"

namespace attnkit {

// The transparent huge page size of x86-64 Linux.
inline constexpr size_t kHugePageBytes = size_t{2} << 20;

// At least `bytes` (0 allowed) of host memory aligned to `align` (a power of two), not
// zeroed. A buffer of kHugePageBytes or more is aligned to kHugePageBytes, rounded up to
// whole huge pages and advised for transparent huge pages (Linux: madvise MADV_HUGEPAGE;
// whether the kernel gives them is /sys/kernel/mm/transparent_hugepage/enabled), unless
// ATTNKIT_HUGE_PAGES is off (read at each call): a stream over the buffer then misses the
// TLB once per 2 MiB instead of once per 4 KiB. Throws Error(kInvalidArgument) for an
// `align` that is not a power of two, Error(kOutOfMemory) when the memory cannot be had.
// Free with std::free.
ATTNKIT_API void* allocate_streamed_host_memory(size_t bytes, size_t align = 64);

// Whether allocate_streamed_host_memory advises huge pages now (ATTNKIT_HUGE_PAGES, on by
// default, on a system that has madvise(MADV_HUGEPAGE)).
ATTNKIT_API bool streamed_host_memory_uses_huge_pages();

}  // namespace attnkit
