#pragma once
// The cache update's per-target entry points (cache_update_<isa>.cpp, one translation unit
// each). Callers go through attnkit/kernels/cpu_cache_update.h, which picks one.

#include "attnkit/kernels/paged_attention_params.h"

namespace attnkit::cpu {

void cache_update_scalar(const CacheUpdateParams& p);
void cache_update_avx2(const CacheUpdateParams& p);
void cache_update_avx512(const CacheUpdateParams& p);

}  // namespace attnkit::cpu
