#include "attnkit/bench/attention_bench.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <memory>
#include <optional>
#include <sstream>

#include "attnkit/bench/machine_ceilings.h"
#include "attnkit/core/device_memory.h"
#include "attnkit/core/error.h"
#include "attnkit/core/platform.h"
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
     << to_string(resolve_kv_cache_dtype(kv_cache_dtype, dtype)) << ", block " << block_size;
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

namespace {

// The layer's question to validate(): the shape's heads, sizes, dtypes and masks.
SelectorConfig bench_config(const BenchShape& shape) {
  SelectorConfig config;
  config.head_size = config.head_size_v = shape.head_size;
  config.num_heads = shape.num_heads;
  config.num_kv_heads = shape.num_kv_heads;
  config.dtype = shape.dtype;
  config.kv_cache_dtype = resolve_kv_cache_dtype(shape.kv_cache_dtype, shape.dtype);
  config.block_size = shape.block_size;
  config.has_sinks = shape.sinks;
  config.attn_type = shape.causal ? AttentionType::kDecoder : AttentionType::kEncoderDecoder;
  return config;
}

// Where `backend` runs: this CPU, or CUDA device 0 (Error(kUnsupported) when absent).
Platform bench_platform(const AttentionBackend& backend) {
  if (backend.capabilities().platform != PlatformKind::kCuda) return cpu_platform();
  const std::optional<Platform> gpu = local_cuda_platform(0);
  if (!gpu) {
    throw Error(ErrorCode::kUnsupported, std::string(backend.name()) +
                                             " runs on CUDA and this machine has no usable "
                                             "CUDA device (or this binary has no CUDA)");
  }
  return *gpu;
}

// The step's inputs where the backend's kernels read them: the host buffers themselves for
// a CPU backend, device copies for a CUDA one.
class PlacedInputs {
 public:
  PlacedInputs(StepInputs& in, const Platform& platform) : in_(in) {
    if (platform.kind != PlatformKind::kCuda) return;
    memory_ = make_cuda_memory(0);
    device_ = Device{DeviceType::kCuda, 0};
    auto place = [&](AlignedBytes& host) {
      DeviceBuffer& b = buffers_.emplace_back(*memory_, host.size());
      memory_->copy_to_device(b.data(), host.data(), host.size());
      return b.data();
    };
    q_ = place(in.q);
    out_ = place(in.out);
    key_ = place(in.key);
    value_ = place(in.value);
    for (size_t l = 0; l < in.k_layers.size(); ++l) {
      k_layers_.push_back(place(in.k_layers[l]));
      v_layers_.push_back(place(in.v_layers[l]));
    }
  }

  TensorView tensor(AlignedBytes& host, void* device, ScalarType t, int64_t n0, int64_t n1,
                    int64_t n2) const {
    return TensorView::contiguous(memory_ ? device : host.data(), t, {n0, n1, n2}, device_);
  }
  TensorView q(int64_t t, int64_t h, int64_t d) const { return tensor(in_.q, q_, in_.dt, t, h, d); }
  TensorView out(int64_t t, int64_t h, int64_t d) const {
    return tensor(in_.out, out_, in_.dt, t, h, d);
  }
  TensorView key(int64_t t, int64_t h, int64_t d) const {
    return tensor(in_.key, key_, in_.dt, t, h, d);
  }
  TensorView value(int64_t t, int64_t h, int64_t d) const {
    return tensor(in_.value, value_, in_.dt, t, h, d);
  }
  KvCacheTensors cache(size_t layer, KvLayout layout, int heads, int d) const {
    KvCacheTensors c = in_.cache(layer, layout, heads, d);
    if (memory_) {
      c.key.data = k_layers_[layer];
      c.value.data = v_layers_[layer];
      c.key.device = c.value.device = device_;
    }
    return c;
  }
  // Waits for the device's work (nothing on the CPU, where forward() returns when done).
  void synchronize() const {
    if (memory_) memory_->synchronize();
  }

 private:
  StepInputs& in_;
  std::unique_ptr<DeviceMemory> memory_;
  Device device_;
  std::vector<DeviceBuffer> buffers_;
  void *q_ = nullptr, *out_ = nullptr, *key_ = nullptr, *value_ = nullptr;
  std::vector<void*> k_layers_, v_layers_;
};

}  // namespace

Timing time_backend(const AttentionBackend& backend, const BenchShape& shape,
                    const TimingOptions& options) {
  const Platform platform = bench_platform(backend);
  const std::vector<std::string> reasons = backend.validate(bench_config(shape), platform);
  if (!reasons.empty()) {
    std::string all;
    for (const std::string& r : reasons) all += (all.empty() ? "" : "; ") + r;
    throw Error(ErrorCode::kUnsupported,
                std::string(backend.name()) + " cannot run " + shape.describe() + ": " + all);
  }
  if (const std::optional<std::string> why = backend.binary_reason(platform)) {
    throw Error(ErrorCode::kUnsupported, std::string(backend.name()) + ": " + *why);
  }
  const KvLayout layout = backend.kv_layout();
  StepInputs in(shape, layout, true, !options.cache_resident);
  const PlacedInputs placed(in, platform);
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
  const TensorView q = placed.q(T, H, d);
  const TensorView out = placed.out(T, H, d);
  // Cross attention reads an already filled cache: no fresh K/V.
  const TensorView k = shape.causal ? placed.key(T, KV, d) : TensorView{};
  const TensorView v = shape.causal ? placed.value(T, KV, d) : TensorView{};
  const size_t layers = in.k_layers.size();
  std::vector<KvCacheTensors> caches;
  for (size_t l = 0; l < layers; ++l) caches.push_back(placed.cache(l, layout, KV, d));

  size_t next = 0;
  for (int i = 0; i < options.warmup; ++i)
    impl->forward(q, k, v, caches[next++ % layers], meta, out);
  placed.synchronize();
  // A device backend's forward() returns before its kernels finish: each repeat times a
  // run of forwards back to back, long enough (>= 2 ms) that the final wait is noise, and
  // reports the time per forward.
  int per_repeat = 1;
  if (platform.kind == PlatformKind::kCuda) {
    const auto t0 = Clock::now();
    impl->forward(q, k, v, caches[next++ % layers], meta, out);
    placed.synchronize();
    const double once = std::chrono::duration<double>(Clock::now() - t0).count();
    per_repeat = static_cast<int>(std::clamp(2e-3 / std::max(once, 1e-6), 1.0, 1000.0));
  }
  std::vector<double> us, cpu_us;
  double total = 0.0;
  while (static_cast<int>(us.size()) < options.repeats || total < options.min_seconds) {
    const double c0 = process_cpu_seconds();
    const auto t0 = Clock::now();
    for (int i = 0; i < per_repeat; ++i) {
      impl->forward(q, k, v, caches[next++ % layers], meta, out);
    }
    placed.synchronize();
    const double s = std::chrono::duration<double>(Clock::now() - t0).count();
    cpu_us.push_back((process_cpu_seconds() - c0) * 1e6 / per_repeat);
    us.push_back(s * 1e6 / per_repeat);
    total += s;
  }
  Timing t;
  t.median_us = median(us);
  t.median_cpu_us = median(cpu_us);
  t.min_cpu_us = *std::min_element(cpu_us.begin(), cpu_us.end());
  t.min_us = *std::min_element(us.begin(), us.end());
  t.repeats = static_cast<int>(us.size());
  t.layers = static_cast<int>(layers);
  t.device = platform.kind == PlatformKind::kCuda ? platform.to_string() : "cpu";
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
  // The AMX tile rate where the machine runs those kernels and the shape is theirs: bf16 with
  // at least 8 query rows per KV head in some request (CPU_FLASH's tile kernels take such
  // items: prefill tiles, decode with GQA groups of 8 or more).
  const int group = shape.num_heads / std::max(1, shape.num_kv_heads);
  const int most_tokens =
      shape.q_lens.empty() ? 0 : *std::max_element(shape.q_lens.begin(), shape.q_lens.end());
  const bool amx = bf16 && ceilings.amx_bf16_gflop_per_s > 0 && most_tokens * group >= 8;
  r.flop_ceiling_gflop_per_s = amx ? ceilings.amx_bf16_gflop_per_s
                               : bf16 && ceilings.bf16_dot_gflop_per_s > 0
                                   ? ceilings.bf16_dot_gflop_per_s
                                   : ceilings.fma_gflop_per_s;
  r.flop_ratio = r.flop_ceiling_gflop_per_s > 0 ? r.gflop_per_s / r.flop_ceiling_gflop_per_s : 0.0;
  if (timing.min_cpu_us > 0) {
    const double cpu_seconds = timing.min_cpu_us * 1e-6 / std::max(ceilings.threads, 1);
    r.kv_gb_per_s_cpu = w.kv_bytes / cpu_seconds / 1e9;
    r.gflop_per_s_cpu = w.flops / cpu_seconds / 1e9;
    const double flop_cpu = amx ? ceilings.amx_bf16_gflop_per_s_cpu
                            : bf16 && ceilings.bf16_dot_gflop_per_s_cpu > 0
                                ? ceilings.bf16_dot_gflop_per_s_cpu
                                : ceilings.fma_gflop_per_s_cpu;
    r.read_ratio_cpu =
        ceilings.read_gb_per_s_cpu > 0 ? r.kv_gb_per_s_cpu / ceilings.read_gb_per_s_cpu : 0.0;
    r.flop_ratio_cpu = flop_cpu > 0 ? r.gflop_per_s_cpu / flop_cpu : 0.0;
  }
  return r;
}

}  // namespace attnkit::bench
