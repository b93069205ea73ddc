#include "attnkit/runtime/backend_timer.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "attnkit/core/error.h"
#include "attnkit/core/numeric.h"
#include "attnkit/runtime/attention_stack.h"
#include "runtime/counter_hash.h"
#include "runtime/device_io.h"

namespace attnkit {
namespace {

using Clock = std::chrono::steady_clock;

// Successive splitmix64 values (runtime/counter_hash.h) as floats in [-1, 1): cheap enough
// to fill a cache of millions of values.
class Random {
 public:
  explicit Random(uint64_t seed) : state_(seed) {}
  float next() {
    const float x = unit_float(splitmix64(state_));
    state_ += 0x9e3779b97f4a7c15ull;  // splitmix64's own step
    return x;
  }

 private:
  uint64_t state_;
};

void fill_random(void* data, ScalarType type, int64_t count, Random& random) {
  for (int64_t i = 0; i < count; ++i) store_from_float(data, type, i, random.next());
}

HostTensor random_rows(ScalarType type, int64_t rows, int heads, int width, Random& random) {
  HostTensor t(type, {rows, heads, width});
  fill_random(t.data(), type, t.view().numel(), random);
  return t;
}

// A one-layer model asking what `layer` asks.
ModelDescription one_layer_model(const SelectorConfig& layer) {
  if (layer.num_heads <= 0 || layer.num_kv_heads <= 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("tuning needs the layer's head counts; this layer ({}) has {} query "
                            "and {} KV heads",
                            layer.describe(), layer.num_heads, layer.num_kv_heads));
  }
  LayerSpec spec;
  spec.name = "tuning.self_attn";
  spec.layer_type = "full_attention";
  spec.attn_type = AttentionType::kDecoder;
  spec.kind = kind_of(layer);
  spec.num_heads = layer.num_heads;
  spec.num_kv_heads = layer.num_kv_heads;
  spec.head_size = layer.head_size;
  spec.head_size_v = layer.head_size_v;
  spec.scale = 1.0f / std::sqrt(static_cast<float>(layer.head_size));
  spec.sliding_window = layer.sliding_window;
  spec.chunk_size = layer.chunk_size;
  spec.has_sinks = layer.has_sinks;
  spec.sink_len = layer.sink_len;
  spec.soft_cap = layer.soft_cap;
  ModelDescription model;
  model.name = "tuning";
  model.source = "tuning";
  model.dtype = layer.dtype;
  model.layers = {spec};
  return model;
}

class StackTimer final : public BackendTimer {
 public:
  explicit StackTimer(TimerOptions options) : options_(options) {}

  double median_forward_us(const AttentionBackend& backend, const SelectorConfig& layer,
                           const Platform& platform, const ShapeBucket& bucket,
                           int* repeats) override {
    const ModelDescription model = one_layer_model(layer);
    const int reqs = bucket.num_reqs, query = bucket.query_len, context = bucket.context_len;
    if (reqs < 1 || query < 1 || context < query) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("tuning bucket '{}' needs requests >= 1 and 1 <= query length <= "
                              "context length",
                              bucket.describe()));
    }
    AttentionStackOptions o;
    o.platform = platform;
    o.dtype = layer.dtype;
    o.kv_cache_dtype = layer.kv_cache_dtype;
    o.block_size = layer.block_size;
    o.attention.backend = std::string(backend.name());
    o.attention.backend_source = BackendSource::kConfig;
    o.registry = options_.registry;
    o.checked = false;
    // The fill prefill (every context at once) is the largest step.
    o.limits = {reqs, reqs * std::max(query, context - query), 0, context};
    const double token_bytes =
        static_cast<double>(layer.num_kv_heads) * (layer.head_size + layer.head_size_v) * 4.0;
    // Every request's context plus a partly filled block each, twice over for paging slack.
    o.kv_cache_bytes = static_cast<size_t>(2.0 * reqs * (context + 256) * token_bytes) + (1u << 20);
    AttentionStack stack(model, o);
    const int index = stack.layers().front().index;
    const AttentionLayerParams& p = stack.layer(index).params;
    const ScalarType type = scalar_type_of(stack.dtype());
    DeviceIo io(platform.kind);
    Random random(options_.seed ^ (static_cast<uint64_t>(reqs) << 40) ^
                  (static_cast<uint64_t>(query) << 20) ^ static_cast<uint64_t>(context));

    // The context of every request, in the cache.
    std::vector<StepRequest> prefill, step;
    for (int r = 0; r < reqs; ++r) {
      stack.add_request(r);
      if (context > query) prefill.push_back({r, 0, context - query});
      step.push_back({r, context - query, query});
    }
    if (!prefill.empty()) {
      stack.plan_step(prefill);
      if (io.on_host()) {
        const KvCacheTensors& cache = stack.kv_cache(index);
        for (const TensorView* t : {&cache.key, &cache.value}) {
          if (!t->empty()) fill_random(t->data, t->dtype, t->numel(), random);
        }
      } else {
        run_forward(stack, io, index, p, type, static_cast<int64_t>(context - query) * reqs,
                    random);
      }
    }
    std::vector<double> times;
    for (int i = 0; i < options_.warmup + options_.repeats; ++i) {
      stack.plan_step(step);
      const double us = run_forward(stack, io, index, p, type, int64_t{reqs} * query, random);
      if (i >= options_.warmup) times.push_back(us);
    }
    std::sort(times.begin(), times.end());
    if (repeats != nullptr) *repeats = static_cast<int>(times.size());
    return times[times.size() / 2];
  }

 private:
  // One forward() of the planned step on fresh random rows; microseconds until the
  // device's work is done.
  static double run_forward(AttentionStack& stack, DeviceIo& io, int index,
                            const AttentionLayerParams& p, ScalarType type, int64_t tokens,
                            Random& random) {
    const HostTensor q = random_rows(type, tokens, p.num_heads, p.head_size, random);
    const HostTensor k = random_rows(type, tokens, p.num_kv_heads, p.head_size, random);
    const HostTensor v = random_rows(type, tokens, p.num_kv_heads, p.head_size_v, random);
    const HostTensor out(type, {tokens, p.num_heads, p.head_size_v});
    const TensorView qd = io.stage(q, 0), kd = io.stage(k, 1), vd = io.stage(v, 2);
    const TensorView od = io.scratch(out, 3);
    io.synchronize();
    const auto start = Clock::now();
    stack.forward(index, qd, kd, vd, od);
    io.synchronize();
    return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  }

  TimerOptions options_;
};

}  // namespace

std::shared_ptr<BackendTimer> make_backend_timer(TimerOptions options) {
  if (options.repeats < 1 || options.warmup < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("tuning needs at least 1 timed repetition and no negative warm-up; "
                            "got {} repetitions, {} warm-up",
                            options.repeats, options.warmup));
  }
  return std::make_shared<StackTimer>(options);
}

std::shared_ptr<const Tuning> make_measuring_tuning(std::string cache_path, TimerOptions options,
                                                    std::vector<ShapeBucket> buckets) {
  return std::make_shared<const Tuning>(
      cache_path.empty() ? default_tuning_cache_path() : std::move(cache_path),
      make_backend_timer(options), std::move(buckets));
}

}  // namespace attnkit
