#pragma once
// The peer bench/cpu_attention_bench.cpp measures CPU backends against: a straightforward
// single-threaded scalar attention over the same inputs as time_backend() (same shapes,
// random values and paged KV cache, attention_bench.h).

#include "attnkit/bench/attention_bench.h"
#include "attnkit/export.h"

namespace attnkit::bench {

// Times a straightforward single-threaded scalar implementation (per query and head:
// scalar dot products, materialised scores, two-pass softmax, scalar weighted sum) over
// the same kind of inputs. When the work exceeds `max_flops`, it is timed on KV head 0's
// query heads only and scaled by num_kv_heads (every KV head costs the same).
ATTNKIT_API Timing time_scalar_baseline(const BenchShape& shape, const TimingOptions& options,
                                        double max_flops = 4e9);

}  // namespace attnkit::bench
