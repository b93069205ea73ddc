#include "attnkit/bench/attention_bench.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <sstream>

#include "attnkit/bench/machine_ceilings.h"
#include "attnkit/core/error.h"
#include "attnkit/kernels/mask.h"
#include "bench_support/step_inputs.h"

namespace attnkit::bench {
namespace {

using Clock = std::chrono::steady_clock;

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

BenchShape BenchShape::uniform(std::string name, int heads, int kv_heads, int head_size, int batch,
                               int context, int query_len) {
  BenchShape s;
  s.name = std::move(name);
  s.num_heads = heads;
  s.num_kv_heads = kv_heads;
  s.head_size = head_size;
  s.q_lens.assign(static_cast<size_t>(batch), query_len);
  s.kv_lens.assign(static_cast<size_t>(batch), context);
  return s;
}

std::string BenchShape::describe() const {
  std::ostringstream os;
  os << num_heads << "/" << num_kv_heads << " heads d" << head_size << ", " << q_lens.size()
     << " requests";
  const bool uniform_lens =
      std::all_of(q_lens.begin(), q_lens.end(), [&](int v) { return v == q_lens[0]; }) &&
      std::all_of(kv_lens.begin(), kv_lens.end(), [&](int v) { return v == kv_lens[0]; });
  if (uniform_lens) os << " x (query " << q_lens[0] << ", context " << kv_lens[0] << ")";
  os << (sinks ? ", sinks" : "") << ", kv "
     << to_string(kv_cache_dtype == KvCacheDType::kAuto ? KvCacheDType::kBFloat16 : kv_cache_dtype)
     << ", block " << block_size;
  return os.str();
}

BenchWork bench_work(const BenchShape& s) {
  BenchWork w;
  const double kv_elem = static_cast<double>(kv_cache_dtype_bytes(s.kv_cache_dtype, s.dtype));
  for (size_t i = 0; i < s.q_lens.size(); ++i) {
    const int q = s.q_lens[i], kv = s.kv_lens[i];
    w.tokens += q;
    w.kv_bytes += static_cast<double>(kv) * s.num_kv_heads * 2.0 * s.head_size * kv_elem;
    for (int j = 0; j < q; ++j) {
      const KeySpan keys = visible_keys(MaskRule{.causal = s.causal}, query_position(q, kv, j), kv);
      w.flops += static_cast<double>(keys.size()) * s.num_heads * 4.0 * s.head_size;
    }
  }
  return w;
}

BenchShape one_kv_head(const BenchShape& shape) {
  BenchShape s = shape;
  s.num_heads = shape.num_heads / shape.num_kv_heads;
  s.num_kv_heads = 1;
  return s;
}

Timing time_backend(const AttentionBackend& backend, const BenchShape& shape,
                    const TimingOptions& options) {
  SelectorConfig config;
  config.head_size = config.head_size_v = shape.head_size;
  config.num_heads = shape.num_heads;
  config.num_kv_heads = shape.num_kv_heads;
  config.dtype = shape.dtype;
  config.kv_cache_dtype = shape.kv_cache_dtype;
  config.block_size = shape.block_size;
  config.has_sinks = shape.sinks;
  config.attn_type = shape.causal ? AttentionType::kDecoder : AttentionType::kEncoderDecoder;
  const std::vector<std::string> reasons = backend.validate(config, cpu_platform());
  if (!reasons.empty()) {
    std::string all;
    for (const std::string& r : reasons) all += (all.empty() ? "" : "; ") + r;
    throw Error(ErrorCode::kUnsupported,
                std::string(backend.name()) + " cannot run " + shape.describe() + ": " + all);
  }
  const KvLayout layout = backend.kv_layout();
  StepInputs in(shape, layout);
  KvCacheSpec spec;
  spec.block_size = shape.block_size;
  spec.num_kv_heads = shape.num_kv_heads;
  spec.head_size = spec.head_size_v = shape.head_size;
  spec.dtype = in.kt;
  auto builder = backend.make_builder(spec, in.layer);
  const AttentionMetadata& meta = builder->build(in.common);
  auto impl = backend.make_impl(in.layer);
  const int T = in.common.num_actual_tokens, H = shape.num_heads, KV = shape.num_kv_heads;
  const int d = shape.head_size;
  const TensorView q = in.tensor(in.q, in.dt, T, H, d);
  const TensorView out = in.tensor(in.out, in.dt, T, H, d);
  // Cross attention reads an already filled cache: no fresh K/V.
  const TensorView k = shape.causal ? in.tensor(in.key, in.dt, T, KV, d) : TensorView{};
  const TensorView v = shape.causal ? in.tensor(in.value, in.dt, T, KV, d) : TensorView{};
  const size_t layers = in.k_layers.size();
  std::vector<KvCacheTensors> caches;
  for (size_t l = 0; l < layers; ++l) caches.push_back(in.cache(l, layout, KV, d));

  size_t next = 0;
  for (int i = 0; i < options.warmup; ++i)
    impl->forward(q, k, v, caches[next++ % layers], meta, out);
  std::vector<double> us, cpu_us;
  double total = 0.0;
  while (static_cast<int>(us.size()) < options.repeats || total < options.min_seconds) {
    const double c0 = process_cpu_seconds();
    const auto t0 = Clock::now();
    impl->forward(q, k, v, caches[next++ % layers], meta, out);
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    cpu_us.push_back((process_cpu_seconds() - c0) * 1e6);
    us.push_back(s * 1e6);
    total += s;
  }
  Timing t;
  t.median_us = median(us);
  t.median_cpu_us = median(cpu_us);
  t.min_cpu_us = *std::min_element(cpu_us.begin(), cpu_us.end());
  t.min_us = *std::min_element(us.begin(), us.end());
  t.repeats = static_cast<int>(us.size());
  t.layers = static_cast<int>(layers);
  return t;
}

BenchReport make_report(const BenchShape& shape, const Timing& timing,
                        const MachineCeilings& ceilings) {
  const BenchWork w = bench_work(shape);
  BenchReport r;
  r.median_us = timing.median_us;
  r.min_us = timing.min_us;
  const double seconds = timing.median_us * 1e-6;
  r.kv_gb_per_s = w.kv_bytes / seconds / 1e9;
  r.gflop_per_s = w.flops / seconds / 1e9;
  r.read_ratio = ceilings.read_gb_per_s > 0 ? r.kv_gb_per_s / ceilings.read_gb_per_s : 0.0;
  const bool bf16 = shape.dtype == DType::kBFloat16 &&
                    scalar_type_of(shape.kv_cache_dtype, shape.dtype) == ScalarType::kBFloat16;
  r.flop_ceiling_gflop_per_s = bf16 && ceilings.bf16_dot_gflop_per_s > 0
                                   ? ceilings.bf16_dot_gflop_per_s
                                   : ceilings.fma_gflop_per_s;
  r.flop_ratio = r.flop_ceiling_gflop_per_s > 0 ? r.gflop_per_s / r.flop_ceiling_gflop_per_s : 0.0;
  if (timing.min_cpu_us > 0) {
    const double cpu_seconds = timing.min_cpu_us * 1e-6 / std::max(ceilings.threads, 1);
    r.kv_gb_per_s_cpu = w.kv_bytes / cpu_seconds / 1e9;
    r.gflop_per_s_cpu = w.flops / cpu_seconds / 1e9;
    const double flop_cpu = bf16 && ceilings.bf16_dot_gflop_per_s_cpu > 0
                                ? ceilings.bf16_dot_gflop_per_s_cpu
                                : ceilings.fma_gflop_per_s_cpu;
    r.read_ratio_cpu =
        ceilings.read_gb_per_s_cpu > 0 ? r.kv_gb_per_s_cpu / ceilings.read_gb_per_s_cpu : 0.0;
    r.flop_ratio_cpu = flop_cpu > 0 ? r.gflop_per_s_cpu / flop_cpu : 0.0;
  }
  return r;
}

}  // namespace attnkit::bench
