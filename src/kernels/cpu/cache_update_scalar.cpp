// The cache-update kernel compiled for the portable fallback (baseline ISA). See
// cache_update_impl.h for the algorithm; target_begin.h for the per-target mechanism.

#define ATTNKIT_CPU_TARGET_SCALAR
#include "kernels/cpu/cache_update_targets.h"
#include "kernels/cpu/isa_prelude.h"
// The target region: everything below until target_end.h is compiled for this target.
#include "kernels/cpu/target_begin.h"

#if ATTNKIT_TARGET_ENABLED

namespace attnkit::cpu::ATTNKIT_TARGET_NS {
// clang-format off
#include ATTNKIT_TARGET_SIMD
#include "kernels/cpu/row_io.h"
#include "kernels/cpu/cache_update_impl.h"
// clang-format on
}  // namespace attnkit::cpu::ATTNKIT_TARGET_NS

namespace attnkit::cpu {

void cache_update_scalar(const CacheUpdateParams& p) { ATTNKIT_TARGET_NS::run_cache_update(p); }

}  // namespace attnkit::cpu

#endif  // ATTNKIT_TARGET_ENABLED

#include "kernels/cpu/target_end.h"
