#include "attnkit/core/error.h"
#include "attnkit/kernels/cpu_cache_update.h"
#include "kernels/cpu/cache_update_targets.h"

namespace attnkit::cpu {

void cache_update(const CacheUpdateParams& p) { cache_update(p, active_cpu_isa()); }

void cache_update(const CacheUpdateParams& p, CpuIsa isa) {
  ATTNKIT_CHECK(p.head_size % kCacheUpdateHeadSizeMultiple == 0 &&
                    p.head_size_v % kCacheUpdateHeadSizeMultiple == 0,
                "head sizes must be multiples of 16");
  if (p.num_tokens == 0) return;
  switch (isa) {
#if defined(__x86_64__) || defined(__i386__)
    case CpuIsa::kAvx512:
      return cache_update_avx512(p);
    case CpuIsa::kAvx2:
      return cache_update_avx2(p);
#endif
    default:
      return cache_update_scalar(p);
  }
}

}  // namespace attnkit::cpu
