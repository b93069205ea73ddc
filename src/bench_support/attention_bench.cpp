#include "attnkit/bench/attention_bench.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>

#include "attnkit/bench/machine_ceilings.h"
#include "attnkit/core/device_memory.h"
#include "attnkit/core/error.h"
#include "attnkit/core/numeric.h"
#include "attnkit/core/platform.h"
#include "attnkit/kernels/mask.h"

namespace attnkit::bench {
namespace {

using Clock = std::chrono::steady_clock;

// A small fast generator: filling hundreds of MB with std::mt19937 would dominate set-up.
struct XorShift {
  uint64_t s;
  float next() {  // uniform in [-1, 1)
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return static_cast<float>(static_cast<int64_t>(s >> 40) - (int64_t{1} << 23)) * 0x1p-23f;
  }
};

// A zero-filled byte buffer aligned like the library's KV cache storage (256 bytes), so
// rows start on cache lines as they do in a real cache (a plain std::vector is only 16-byte
// aligned, which makes every 64-byte vector load of a row straddle two cache lines).
class AlignedBytes {
 public:
  static constexpr size_t kAlign = 256;
  AlignedBytes() = default;
  explicit AlignedBytes(size_t n) { resize(n); }
  void resize(size_t n) {
    const size_t rounded = std::max<size_t>((n + kAlign - 1) / kAlign * kAlign, kAlign);
    void* p = std::aligned_alloc(kAlign, rounded);
    if (p == nullptr) throw Error(ErrorCode::kInternal, "benchmark buffer allocation failed");
    std::memset(p, 0, rounded);
    data_.reset(static_cast<uint8_t*>(p));
    size_ = n;
  }
  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> data_;
  size_t size_ = 0;
};

void fill_random(AlignedBytes& buf, ScalarType type, uint64_t seed) {
  XorShift rng{seed * 0x9E3779B97F4A7C15ull + 1};
  const size_t n = buf.size() / size_of(type);
  if (type == ScalarType::kBFloat16) {
    auto* p = reinterpret_cast<uint16_t*>(buf.data());
    for (size_t i = 0; i < n; ++i) p[i] = float_to_bf16_bits(rng.next());
  } else if (type == ScalarType::kFloat32) {
    auto* p = reinterpret_cast<float*>(buf.data());
    for (size_t i = 0; i < n; ++i) p[i] = rng.next();
  } else {
    for (size_t i = 0; i < n; ++i)
      store_from_float(buf.data(), type, static_cast<int64_t>(i), rng.next());
  }
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Every buffer of one benchmark step.
struct StepInputs {
  AttentionLayerParams layer;
  CommonAttentionMetadata common;
  ScalarType dt = ScalarType::kBFloat16, kt = ScalarType::kBFloat16;
  AlignedBytes q, out, key, value;
  std::vector<AlignedBytes> k_layers, v_layers;
  int64_t num_blocks = 0;

  StepInputs(const BenchShape& s, KvLayout layout, bool allocate_cache = true);
  TensorView tensor(AlignedBytes& b, ScalarType t, int64_t n0, int64_t n1, int64_t n2) const {
    return TensorView::contiguous(b.data(), t, {n0, n1, n2});
  }
  KvCacheTensors cache(size_t layer_index, KvLayout layout, int heads, int d) {
    KvCacheTensors c;
    c.layout = layout;
    c.block_size = common.block_size;
    const int64_t bs = common.block_size;
    auto view = [&](AlignedBytes& b) {
      return layout == KvLayout::kHND
                 ? TensorView::contiguous(b.data(), kt, {num_blocks, heads, bs, d})
                 : TensorView::contiguous(b.data(), kt, {num_blocks, bs, heads, d});
    };
    c.key = view(k_layers[layer_index]);
    c.value = view(v_layers[layer_index]);
    return c;
  }
};

StepInputs::StepInputs(const BenchShape& s, KvLayout /*layout*/, bool allocate_cache) {
  const int B = static_cast<int>(s.q_lens.size());
  if (B == 0 || s.kv_lens.size() != s.q_lens.size()) {
    throw Error(ErrorCode::kInvalidArgument, "benchmark shape needs one kv_len per request");
  }
  dt = scalar_type_of(s.dtype);
  kt = scalar_type_of(s.kv_cache_dtype, s.dtype);
  layer.attn_type = s.causal ? AttentionType::kDecoder : AttentionType::kEncoderDecoder;
  layer.num_heads = s.num_heads;
  layer.num_kv_heads = s.num_kv_heads;
  layer.head_size = layer.head_size_v = s.head_size;
  layer.scale = 1.0f / std::sqrt(static_cast<float>(s.head_size));
  layer.dtype = s.dtype;
  layer.kv_cache_dtype = resolve_kv_cache_dtype(s.kv_cache_dtype, s.dtype);
  if (is_fp8(s.kv_cache_dtype)) layer.k_scale = layer.v_scale = 0.05f;
  if (s.sinks) {
    XorShift rng{7};
    for (int h = 0; h < s.num_heads; ++h) layer.sinks.push_back(1.0f + rng.next());
  }
  const int bs = s.block_size;
  common.num_reqs = B;
  common.block_size = bs;
  common.causal = s.causal;
  common.query_start_loc.assign(1, 0);
  int max_blocks = 1;
  for (int i = 0; i < B; ++i) {
    if (s.q_lens[static_cast<size_t>(i)] > s.kv_lens[static_cast<size_t>(i)] ||
        s.q_lens[static_cast<size_t>(i)] < 1) {
      throw Error(ErrorCode::kInvalidArgument,
                  "query_len " + std::to_string(s.q_lens[static_cast<size_t>(i)]) +
                      " must be in [1, context " +
                      std::to_string(s.kv_lens[static_cast<size_t>(i)]) + "]");
    }
    common.query_start_loc.push_back(common.query_start_loc.back() +
                                     s.q_lens[static_cast<size_t>(i)]);
    common.seq_lens.push_back(s.kv_lens[static_cast<size_t>(i)]);
    max_blocks = std::max(max_blocks, (s.kv_lens[static_cast<size_t>(i)] + bs - 1) / bs);
    common.max_query_len = std::max(common.max_query_len, s.q_lens[static_cast<size_t>(i)]);
    common.max_seq_len = std::max(common.max_seq_len, s.kv_lens[static_cast<size_t>(i)]);
  }
  const int T = common.query_start_loc.back();
  common.num_actual_tokens = T;
  common.max_blocks_per_req = max_blocks;
  num_blocks = int64_t{B} * max_blocks + 1;
  // Physical blocks in random order, as a long-running block pool hands them out.
  std::vector<int32_t> physical(static_cast<size_t>(num_blocks));
  std::iota(physical.begin(), physical.end(), 0);
  std::shuffle(physical.begin(), physical.end(), std::mt19937(1234));
  common.block_table.assign(static_cast<size_t>(B) * max_blocks, 0);
  size_t next = 0;
  for (int i = 0; i < B; ++i) {
    const int used = (s.kv_lens[static_cast<size_t>(i)] + bs - 1) / bs;
    for (int b = 0; b < used; ++b)
      common.block_table[static_cast<size_t>(i) * max_blocks + b] = physical[next++];
    for (int j = 0; j < s.q_lens[static_cast<size_t>(i)]; ++j) {
      const int pos = s.kv_lens[static_cast<size_t>(i)] - s.q_lens[static_cast<size_t>(i)] + j;
      common.slot_mapping.push_back(
          s.causal
              ? int64_t{common.block_table[static_cast<size_t>(i) * max_blocks + pos / bs]} * bs +
                    pos % bs
              : -1);
    }
  }
  const int H = s.num_heads, KV = s.num_kv_heads, d = s.head_size;
  q.resize(static_cast<size_t>(T) * H * d * size_of(dt));
  out.resize(q.size());
  key.resize(static_cast<size_t>(T) * KV * d * size_of(dt));
  value.resize(key.size());
  fill_random(q, dt, 1);
  fill_random(key, dt, 2);
  fill_random(value, dt, 3);
  if (!allocate_cache) return;
  const double layer_bytes =
      2.0 * static_cast<double>(num_blocks) * bs * KV * d * static_cast<double>(size_of(kt));
  const int layers = std::clamp(static_cast<int>(std::ceil(kMinRotatedBytes / layer_bytes)), 1, 64);
  for (int l = 0; l < layers; ++l) {
    k_layers.emplace_back(static_cast<size_t>(layer_bytes / 2));
    v_layers.emplace_back(static_cast<size_t>(layer_bytes / 2));
    fill_random(k_layers.back(), kt, 10 + 2 * static_cast<uint64_t>(l));
    fill_random(v_layers.back(), kt, 11 + 2 * static_cast<uint64_t>(l));
  }
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
  StepInputs in(shape, layout);
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

namespace {

// The straightforward implementation the benchmark compares against: one query and head
// at a time, scalar loops, scores materialised, two-pass softmax.
template <class Load>
void scalar_attention(const BenchShape& s, const StepInputs& in, const AlignedBytes& kc,
                      const AlignedBytes& vc, Load load, std::vector<float>& out) {
  const int H = s.num_heads, KV = s.num_kv_heads, d = s.head_size, bs = s.block_size;
  const int group = H / KV;
  std::vector<float> q(static_cast<size_t>(d)), score;
  for (int r = 0; r < in.common.num_reqs; ++r) {
    const int q_len = s.q_lens[static_cast<size_t>(r)], kv_len = s.kv_lens[static_cast<size_t>(r)];
    score.resize(static_cast<size_t>(kv_len));
    for (int j = 0; j < q_len; ++j) {
      const int t = in.common.query_start_loc[static_cast<size_t>(r)] + j;
      const KeySpan keys =
          visible_keys(MaskRule{.causal = s.causal}, query_position(q_len, kv_len, j), kv_len);
      for (int h = 0; h < H; ++h) {
        const int kvh = h / group;
        for (int x = 0; x < d; ++x)
          q[static_cast<size_t>(x)] =
              load_as_float(in.q.data(), in.dt, (int64_t{t} * H + h) * d + x);
        float m = -INFINITY;
        for (int k = keys.begin; k < keys.end; ++k) {
          const int64_t blk =
              in.common.block_table[static_cast<size_t>(r) * in.common.max_blocks_per_req +
                                    static_cast<size_t>(k / bs)];
          const int64_t base = ((blk * bs + k % bs) * KV + kvh) * d;
          float dot = 0.0f;
          for (int x = 0; x < d; ++x) dot += q[static_cast<size_t>(x)] * load(kc, base + x);
          score[static_cast<size_t>(k)] = dot * in.layer.scale;
          m = std::max(m, score[static_cast<size_t>(k)]);
        }
        float denom =
            in.layer.sinks.empty() ? 0.0f : std::exp(in.layer.sinks[static_cast<size_t>(h)] - m);
        float* o = &out[(static_cast<size_t>(t) * H + h) * d];
        std::fill(o, o + d, 0.0f);
        for (int k = keys.begin; k < keys.end; ++k) {
          const float w = std::exp(score[static_cast<size_t>(k)] - m);
          denom += w;
          const int64_t blk =
              in.common.block_table[static_cast<size_t>(r) * in.common.max_blocks_per_req +
                                    static_cast<size_t>(k / bs)];
          const int64_t base = ((blk * bs + k % bs) * KV + kvh) * d;
          for (int x = 0; x < d; ++x) o[x] += w * load(vc, base + x);
        }
        for (int x = 0; x < d; ++x) o[x] /= denom;
      }
    }
  }
}

}  // namespace

Timing time_scalar_baseline(const BenchShape& shape, const TimingOptions& options,
                            double max_flops) {
  const bool sample = bench_work(shape).flops > max_flops && shape.num_kv_heads > 1;
  const BenchShape s = sample ? one_kv_head(shape) : shape;
  StepInputs in(s, KvLayout::kNHD);
  std::vector<float> out(static_cast<size_t>(in.common.num_actual_tokens) * s.num_heads *
                         s.head_size);
  const size_t layers = in.k_layers.size();
  size_t next = 0;
  auto run = [&] {
    const size_t l = next++ % layers;
    if (in.kt == ScalarType::kBFloat16) {
      scalar_attention(
          s, in, in.k_layers[l], in.v_layers[l],
          [](const AlignedBytes& b, int64_t i) {
            return bf16_bits_to_float(reinterpret_cast<const uint16_t*>(b.data())[i]);
          },
          out);
    } else {
      const ScalarType kt = in.kt;
      const float ks = in.layer.k_scale;
      scalar_attention(
          s, in, in.k_layers[l], in.v_layers[l],
          [kt, ks](const AlignedBytes& b, int64_t i) {
            return load_as_float(b.data(), kt, i) * ks;
          },
          out);
    }
  };
  for (int i = 0; i < std::min(options.warmup, 1); ++i) run();
  std::vector<double> us;
  const int repeats = std::max(1, std::min(options.repeats, 3));
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = Clock::now();
    run();
    us.push_back(std::chrono::duration<double>(Clock::now() - t0).count() * 1e6);
  }
  const double scale = sample ? shape.num_kv_heads : 1.0;
  Timing t;
  t.median_us = median(us) * scale;
  t.min_us = *std::min_element(us.begin(), us.end()) * scale;
  t.repeats = repeats;
  t.layers = static_cast<int>(layers);
  return t;
}

}  // namespace attnkit::bench

namespace attnkit::bench {

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
