#pragma once
// What ModelRunner and AttentionStack do with a start-up plan (selector/startup_plan.h)
// before they build anything: refuse a chosen backend that cannot run here, and size the
// block pool from a block count or a byte budget.

#include <cstddef>
#include <string_view>

#include "attnkit/kv_cache/kv_cache_config.h"
#include "attnkit/selector/startup_plan.h"

namespace attnkit {

// Throws Error(kUnsupported) naming the first layer whose chosen backend cannot run here
// (not in this binary, no device) and why; Error(kInvalidArgument) when the plan has no
// attention layer.
void require_runnable(const StartupPlan& plan, std::string_view model_name);

// Blocks of the pool, the null block included: 2 when no layer holds a cache (encoder-only
// models: the pool only needs to exist); `num_blocks` when it is positive; else as many as
// `bytes` holds, which must be at least 2. `bytes_name` names the budget in the error
// (e.g. "kv_cache_bytes").
int pool_blocks(const KvCacheConfig& config, int num_blocks, size_t bytes,
                std::string_view bytes_name);

}  // namespace attnkit
