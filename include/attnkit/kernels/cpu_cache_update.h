#pragma once
// The CPU cache-update kernel: writes a step's fresh K/V into the paged cache at the slot
// mapping (see CacheUpdateParams), converting to the cache dtype. One entry point for every
// CPU backend, dispatched once per call to the SIMD target chosen by active_cpu_isa().

#include "attnkit/export.h"
#include "attnkit/kernels/cpu_isa.h"
#include "attnkit/kernels/paged_attention_params.h"

namespace attnkit::cpu {

// Head sizes the cache update accepts (both K and V): multiples of this, so a row is a
// whole number of SIMD vectors on every target (16 fp32 lanes on AVX-512).
inline constexpr int kCacheUpdateHeadSizeMultiple = 16;

// Inputs are trusted (the backend validates them); a head size that is not a multiple of
// kCacheUpdateHeadSizeMultiple aborts.
ATTNKIT_API void cache_update(const CacheUpdateParams& p);
// The same on an explicit target (which this CPU must run).
ATTNKIT_API void cache_update(const CacheUpdateParams& p, CpuIsa isa);

}  // namespace attnkit::cpu
