#pragma once
// The runtime's BackendTimer (selector/tuning.h): times one backend's forward() on one
// layer configuration and shape bucket, on this machine, through an AttentionStack of one
// layer (so the backend runs exactly as it would in a model: its KV-cache shape, its
// builder reserved for the step, its implementation).
//
// Per measurement: the bucket's requests get their context in the cache (on the CPU the
// cache is filled with random values directly; on a GPU by a prefill through the backend
// itself), then `warmup` + `repeats` steps each plan the bucket's step and run forward()
// on fresh random q/k/v; each forward() is timed with a steady clock (after the device's
// work is done) and the median is returned. The step's slots are rewritten each time, so
// the cache stays the same size.

#include <memory>

#include "attnkit/export.h"
#include "attnkit/registry/registry.h"
#include "attnkit/selector/tuning.h"

namespace attnkit {

struct ATTNKIT_API TimerOptions {
  int warmup = 1;
  int repeats = 5;
  uint64_t seed = 0x7a11ed;
  // Where the measured backend's name is looked up; nullptr = global_registry().
  const BackendRegistry* registry = nullptr;
};

ATTNKIT_API std::shared_ptr<BackendTimer> make_backend_timer(TimerOptions options = {});

// A Tuning over `cache_path` (default_tuning_cache_path() when empty) that measures with
// make_backend_timer(options).
ATTNKIT_API std::shared_ptr<const Tuning> make_measuring_tuning(
    std::string cache_path = {}, TimerOptions options = {},
    std::vector<ShapeBucket> buckets = default_tuning_buckets());

}  // namespace attnkit
