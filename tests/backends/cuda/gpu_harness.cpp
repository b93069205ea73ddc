#include "gpu_harness.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>
#include <stdexcept>

#include "attnkit/build_config.h"
#include "attnkit/core/error.h"
#include "attnkit/core/numeric.h"
#include "backends/cuda_flash/cuda_flash_backend.h"
#include "backends/cuda_paged/cuda_paged_backend.h"

#if ATTNKIT_HAS_CUDA
#include <cuda_runtime.h>
#endif

namespace attnkit::testing {

std::string GpuCase::describe() const {
  std::ostringstream s;
  s << backend << " " << to_string(dtype) << " kv=" << to_string(kv_dtype) << " heads " << num_heads
    << "/" << num_kv_heads << " d" << head_size << " bs" << block_size << " " << to_string(layout)
    << " " << to_string(attn_type);
  if (sliding_window) s << " window=" << sliding_window;
  if (chunk_size) s << " chunk=" << chunk_size;
  if (soft_cap > 0) s << " softcap=" << soft_cap;
  if (sinks) s << " sinks";
  s << " reqs";
  for (auto [q, k] : requests) s << " (" << q << "," << k << ")";
  return s.str();
}

#if ATTNKIT_HAS_CUDA
namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
  }
}

// A device copy of a host byte buffer, freed on scope exit.
struct DeviceBytes {
  void* ptr = nullptr;
  size_t size = 0;
  explicit DeviceBytes(size_t bytes) : size(bytes) {
    check(cudaMalloc(&ptr, std::max<size_t>(bytes, 16)), "cudaMalloc");
  }
  DeviceBytes(const std::vector<uint8_t>& host) : DeviceBytes(host.size()) {
    check(cudaMemcpy(ptr, host.data(), host.size(), cudaMemcpyHostToDevice), "upload");
  }
  ~DeviceBytes() { cudaFree(ptr); }
  std::vector<uint8_t> download() const {
    std::vector<uint8_t> host(size);
    check(cudaMemcpy(host.data(), ptr, size, cudaMemcpyDeviceToHost), "download");
    return host;
  }
};

TensorView device_view(void* data, ScalarType type, std::initializer_list<int64_t> shape) {
  return TensorView::contiguous(data, type, shape, Device{DeviceType::kCuda, 0});
}

}  // namespace

bool gpu_available() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return count > 0;
}

GpuResult run_gpu_case(const GpuCase& c) {
  std::mt19937_64 rng(std::random_device{}());
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const ScalarType compute = scalar_type_of(c.dtype);
  const ScalarType cache_type = scalar_type_of(c.kv_dtype, c.dtype);
  const size_t esz = size_of(compute), csz = size_of(cache_type);
  const int H = c.num_heads, KVH = c.num_kv_heads, D = c.head_size, group = H / KVH;
  const int B = static_cast<int>(c.requests.size());
  // Encoder attention (bidirectional, kEncoder) attends over the step's own K/V like
  // encoder-only and neither reads nor writes the paged cache (backend::uses_paged_cache).
  const bool has_cache =
      c.attn_type != AttentionType::kEncoderOnly && c.attn_type != AttentionType::kEncoder;
  const bool cross = c.attn_type == AttentionType::kEncoderDecoder;
  const bool causal = c.attn_type == AttentionType::kDecoder;

  // Batch layout.
  std::vector<int32_t> qsl{0}, seq_lens;
  for (auto [q, k] : c.requests) {
    qsl.push_back(qsl.back() + q);
    seq_lens.push_back(k);
  }
  const int T = qsl.back();

  // Values the kernels see: inputs rounded to the compute dtype; cached K/V additionally
  // stored as quantize(x / scale) in the cache dtype and read back times the scale.
  auto to_compute = [&](float x) { return round_trip(compute, x); };
  std::vector<uint8_t> q_host(static_cast<size_t>(T) * H * D * esz);
  std::vector<double> q_ref(static_cast<size_t>(T) * H * D);
  for (size_t i = 0; i < q_ref.size(); ++i) {
    const float x = to_compute(uni(rng) * c.q_range);
    store_from_float(q_host.data(), compute, static_cast<int64_t>(i), x);
    q_ref[i] = x;
  }
  // Per request, per position: K and V (compute-rounded) for all kv_len positions.
  std::vector<std::vector<float>> k_vals(static_cast<size_t>(B)), v_vals(static_cast<size_t>(B));
  for (int i = 0; i < B; ++i) {
    const size_t n = static_cast<size_t>(seq_lens[static_cast<size_t>(i)]) * KVH * D;
    k_vals[static_cast<size_t>(i)].resize(n);
    v_vals[static_cast<size_t>(i)].resize(n);
    for (size_t j = 0; j < n; ++j) {
      k_vals[static_cast<size_t>(i)][j] = to_compute(uni(rng));
      v_vals[static_cast<size_t>(i)][j] = to_compute(uni(rng));
    }
  }

  // Paged cache: shuffled block ids, unused slots poisoned with 0xff (NaN in every dtype).
  const int bs = c.block_size;
  int max_blocks = 1, total_blocks = 3;
  for (int k : seq_lens) {
    max_blocks = std::max(max_blocks, (k + bs - 1) / bs);
    total_blocks += (k + bs - 1) / bs;
  }
  std::vector<int32_t> ids(static_cast<size_t>(total_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  std::vector<int32_t> block_table(static_cast<size_t>(B) * max_blocks, 0);
  size_t next = 0;
  for (int i = 0; i < B; ++i) {
    const int nb = (seq_lens[static_cast<size_t>(i)] + bs - 1) / bs;
    for (int b = 0; b < nb; ++b) block_table[static_cast<size_t>(i) * max_blocks + b] = ids[next++];
  }
  const bool nhd = c.layout == KvLayout::kNHD;
  const int64_t token_stride = nhd ? static_cast<int64_t>(KVH) * D : D;
  const int64_t head_stride = nhd ? D : static_cast<int64_t>(bs) * D;
  const int64_t block_stride = static_cast<int64_t>(bs) * KVH * D;
  auto cache_index = [&](int req, int pos, int kvh, int d) {
    const int32_t blk = block_table[static_cast<size_t>(req) * max_blocks + pos / bs];
    return blk * block_stride + (pos % bs) * token_stride + kvh * head_stride + d;
  };
  const size_t cache_elems = static_cast<size_t>(total_blocks) * block_stride;
  std::vector<uint8_t> k_cache(has_cache ? cache_elems * csz : 0, 0xff);
  std::vector<uint8_t> v_cache(has_cache ? cache_elems * csz : 0, 0xff);
  std::vector<uint8_t> k_expect = k_cache, v_expect = v_cache;  // after the cache update
  std::vector<double> k_ref(1), v_ref(1);
  std::vector<std::vector<double>> k_seen(static_cast<size_t>(B)), v_seen(static_cast<size_t>(B));

  // Fresh K/V of this step ([T, KVH, D]) and the slot mapping.
  std::vector<uint8_t> key_host(static_cast<size_t>(T) * KVH * D * esz);
  std::vector<uint8_t> value_host(key_host.size());
  std::vector<int64_t> slot_mapping(static_cast<size_t>(T), -1);
  const float inv_k = 1.0f / c.k_scale, inv_v = 1.0f / c.v_scale;
  for (int i = 0; i < B; ++i) {
    const int q_len = qsl[static_cast<size_t>(i) + 1] - qsl[static_cast<size_t>(i)];
    const int kv_len = seq_lens[static_cast<size_t>(i)];
    const int fresh_from = cross ? kv_len : kv_len - q_len;  // cross: encoder K/V cached
    auto& ks = k_seen[static_cast<size_t>(i)];
    auto& vs = v_seen[static_cast<size_t>(i)];
    ks.resize(static_cast<size_t>(kv_len) * KVH * D);
    vs.resize(ks.size());
    for (int pos = 0; pos < kv_len; ++pos) {
      const bool fresh = pos >= fresh_from;
      const int token = qsl[static_cast<size_t>(i)] + (pos - fresh_from);
      if (fresh && has_cache) {
        slot_mapping[static_cast<size_t>(token)] =
            static_cast<int64_t>(block_table[static_cast<size_t>(i) * max_blocks + pos / bs]) * bs +
            pos % bs;
      }
      for (int h = 0; h < KVH; ++h) {
        for (int d = 0; d < D; ++d) {
          const size_t src = (static_cast<size_t>(pos) * KVH + h) * D + d;
          const float kx = k_vals[static_cast<size_t>(i)][src];
          const float vx = v_vals[static_cast<size_t>(i)][src];
          if (fresh) {
            const int64_t row = (static_cast<int64_t>(token) * KVH + h) * D + d;
            store_from_float(key_host.data(), compute, row, kx);
            store_from_float(value_host.data(), compute, row, vx);
          }
          if (!has_cache) {
            ks[src] = kx;
            vs[src] = vx;
            continue;
          }
          const int64_t ci = cache_index(i, pos, h, d);
          store_from_float(k_expect.data(), cache_type, ci, kx * inv_k);
          store_from_float(v_expect.data(), cache_type, ci, vx * inv_v);
          if (!fresh) {
            store_from_float(k_cache.data(), cache_type, ci, kx * inv_k);
            store_from_float(v_cache.data(), cache_type, ci, vx * inv_v);
          }
          ks[src] = static_cast<double>(load_as_float(k_expect.data(), cache_type, ci)) * c.k_scale;
          vs[src] = static_cast<double>(load_as_float(v_expect.data(), cache_type, ci)) * c.v_scale;
        }
      }
    }
  }

  // Layer.
  AttentionLayerParams layer;
  layer.attn_type = c.attn_type;
  layer.num_heads = H;
  layer.num_kv_heads = KVH;
  layer.head_size = layer.head_size_v = D;
  layer.scale = 1.0f / std::sqrt(static_cast<float>(D));
  layer.sliding_window = c.sliding_window;
  layer.chunk_size = c.chunk_size;
  layer.soft_cap = c.soft_cap;
  layer.dtype = c.dtype;
  layer.kv_cache_dtype = c.kv_dtype;
  layer.k_scale = c.k_scale;
  layer.v_scale = c.v_scale;
  if (c.sinks) {
    std::uniform_real_distribution<float> sink(-1.0f, 3.0f);
    for (int h = 0; h < H; ++h) layer.sinks.push_back(sink(rng));
  }

  CommonAttentionMetadata common;
  common.num_reqs = B;
  common.num_actual_tokens = T;
  common.query_start_loc = qsl;
  common.seq_lens = seq_lens;
  common.block_table = has_cache ? block_table : std::vector<int32_t>{};
  common.max_blocks_per_req = has_cache ? max_blocks : 0;
  common.block_size = has_cache ? bs : 0;
  common.slot_mapping = has_cache ? slot_mapping : std::vector<int64_t>{};
  common.causal = causal;
  for (int i = 0; i < B; ++i) {
    common.max_query_len = std::max(common.max_query_len,
                                    qsl[static_cast<size_t>(i) + 1] - qsl[static_cast<size_t>(i)]);
    common.max_seq_len = std::max(common.max_seq_len, seq_lens[static_cast<size_t>(i)]);
  }
  if (cross) common.encoder_seq_lens = seq_lens;

  // Device buffers; the output is poisoned so unwritten rows show up as NaN.
  DeviceBytes d_q(q_host), d_key(key_host), d_value(value_host);
  DeviceBytes d_kc(k_cache), d_vc(v_cache);
  std::vector<uint8_t> poison(static_cast<size_t>(T) * H * D * esz, 0xff);
  DeviceBytes d_out(poison);

  const auto backend =
      c.backend == "CUDA_FLASH" ? make_cuda_flash_backend() : make_cuda_paged_backend();
  KvCacheSpec spec;
  spec.block_size = bs;
  spec.num_kv_heads = KVH;
  spec.head_size = spec.head_size_v = D;
  spec.dtype = cache_type;
  auto builder = backend->make_builder(spec, layer);
  auto impl = backend->make_impl(layer);
  const AttentionMetadata& meta = builder->build(common);

  KvCacheTensors cache;
  cache.layout = c.layout;
  cache.block_size = bs;
  if (has_cache) {
    if (nhd) {
      cache.key = device_view(d_kc.ptr, cache_type, {total_blocks, bs, KVH, D});
      cache.value = device_view(d_vc.ptr, cache_type, {total_blocks, bs, KVH, D});
    } else {
      cache.key = device_view(d_kc.ptr, cache_type, {total_blocks, KVH, bs, D});
      cache.value = device_view(d_vc.ptr, cache_type, {total_blocks, KVH, bs, D});
    }
  }
  TensorView key, value;
  if (!cross) {
    key = device_view(d_key.ptr, compute, {T, KVH, D});
    value = device_view(d_value.ptr, compute, {T, KVH, D});
  }
  impl->forward(device_view(d_q.ptr, compute, {T, H, D}), key, value, cache, meta,
                device_view(d_out.ptr, compute, {T, H, D}));
  check(cudaDeviceSynchronize(), "forward");

  // fp64 dense oracle.
  GpuResult result;
  const std::vector<uint8_t> out = d_out.download();
  double err2 = 0, ref2 = 0;
  for (int i = 0; i < B; ++i) {
    const int q_len = qsl[static_cast<size_t>(i) + 1] - qsl[static_cast<size_t>(i)];
    const int kv_len = seq_lens[static_cast<size_t>(i)];
    const auto& ks = k_seen[static_cast<size_t>(i)];
    const auto& vs = v_seen[static_cast<size_t>(i)];
    std::vector<double> p(static_cast<size_t>(kv_len));
    for (int j = 0; j < q_len; ++j) {
      const int token = qsl[static_cast<size_t>(i)] + j;
      const int pos = kv_len - q_len + j;
      for (int h = 0; h < H; ++h) {
        const int kvh = h / group;
        double m = c.sinks ? layer.sinks[static_cast<size_t>(h)]
                           : -std::numeric_limits<double>::infinity();
        for (int k = 0; k < kv_len; ++k) {
          bool visible = true;
          if (causal) {
            visible = k <= pos && (c.sliding_window == 0 || k > pos - c.sliding_window) &&
                      (c.chunk_size == 0 || k / c.chunk_size == pos / c.chunk_size);
          }
          if (!visible) {
            p[static_cast<size_t>(k)] = -std::numeric_limits<double>::infinity();
            continue;
          }
          double dot = 0;
          for (int d = 0; d < D; ++d) {
            dot += q_ref[(static_cast<size_t>(token) * H + h) * D + d] *
                   ks[(static_cast<size_t>(k) * KVH + kvh) * D + d];
          }
          double s = dot * layer.scale;
          if (c.soft_cap > 0) s = c.soft_cap * std::tanh(s / c.soft_cap);
          p[static_cast<size_t>(k)] = s;
          m = std::max(m, s);
        }
        double denom = c.sinks ? std::exp(layer.sinks[static_cast<size_t>(h)] - m) : 0.0;
        for (int k = 0; k < kv_len; ++k) {
          const double e =
              std::isinf(p[static_cast<size_t>(k)]) ? 0.0 : std::exp(p[static_cast<size_t>(k)] - m);
          p[static_cast<size_t>(k)] = e;
          denom += e;
        }
        for (int d = 0; d < D; ++d) {
          double ref = 0;
          if (denom > 0 && !std::isinf(m)) {
            for (int k = 0; k < kv_len; ++k) {
              if (p[static_cast<size_t>(k)] != 0) {
                ref += p[static_cast<size_t>(k)] * vs[(static_cast<size_t>(k) * KVH + kvh) * D + d];
              }
            }
            ref /= denom;
          }
          const double got =
              load_as_float(out.data(), compute, (static_cast<int64_t>(token) * H + h) * D + d);
          ++result.outputs;
          if (!std::isfinite(got)) {
            ++result.non_finite;
            continue;
          }
          err2 += (got - ref) * (got - ref);
          ref2 += ref * ref;
          result.max_abs = std::max(result.max_abs, std::abs(got - ref));
        }
      }
    }
  }
  result.rel_l2 = ref2 > 0 ? std::sqrt(err2 / ref2) : std::sqrt(err2);

  if (has_cache) {
    const std::vector<uint8_t> kc = d_kc.download(), vc = d_vc.download();
    for (size_t b = 0; b < kc.size(); ++b) {
      result.cache_mismatches += kc[b] != k_expect[b];
      result.cache_mismatches += vc[b] != v_expect[b];
    }
  }
  return result;
}

#else

bool gpu_available() { return false; }
GpuResult run_gpu_case(const GpuCase&) {
  throw Error(ErrorCode::kUnsupported, "this binary has no CUDA");
}

#endif

}  // namespace attnkit::testing
