#include "paged_harness.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "attnkit/core/numeric.h"
#include "attnkit/core/tensor.h"
#include "backends/reference/reference_backend.h"
#include "dense_oracle.h"

namespace attnkit::testing {
namespace {

struct Rng {
  explicit Rng(uint64_t seed) : gen(seed) {}
  double uniform(double m) { return std::uniform_real_distribution<double>(-m, m)(gen); }
  std::mt19937_64 gen;
};

void nan_fill(const HostTensor& t) {
  for (int64_t i = 0; i < t.view().numel(); ++i) {
    store_from_float(t.data(), t.view().dtype, i, std::nanf(""));
  }
}

}  // namespace

PagedRun run_paged(const PagedProblem& pb) {
  const AttentionLayerParams& L = pb.layer;
  const ScalarType dt = scalar_type_of(L.dtype);
  const ScalarType kvt = scalar_type_of(L.kv_cache_dtype, L.dtype);
  const bool fp8 = is_fp8(L.kv_cache_dtype);
  const double ks = fp8 ? L.k_scale : 1.0;
  const double vs = fp8 ? (L.use_mla ? L.k_scale : L.v_scale) : 1.0;  // MLA: V shares K's scale
  const bool has_cache =
      L.attn_type == AttentionType::kDecoder || L.attn_type == AttentionType::kEncoderDecoder;
  const bool cross = L.attn_type == AttentionType::kEncoderDecoder;
  const int B = static_cast<int>(pb.q_lens.size());
  const int H = L.num_heads, KVH = L.num_kv_heads, D = L.head_size, DV = L.head_size_v;
  const int bs = pb.block_size;
  Rng rng(pb.seed);
  auto fresh = [&] {
    return static_cast<double>(round_trip(dt, static_cast<float>(rng.uniform(pb.value_magnitude))));
  };

  // Per-request keys/values in the compute dtype, [seq_len, KVH, D] / [seq_len, KVH, DV].
  std::vector<std::vector<double>> keys(B), values(B);
  for (int r = 0; r < B; ++r) {
    const int n = pb.seq_lens[r];
    keys[r].resize(static_cast<size_t>(n) * KVH * D);
    for (double& x : keys[r]) x = fresh();
    values[r].resize(static_cast<size_t>(n) * KVH * DV);
    for (int p = 0; p < n; ++p) {
      for (int h = 0; h < KVH; ++h) {
        for (int d = 0; d < DV; ++d) {
          // MLA: V is the prefix of the latent vector.
          values[r][(static_cast<size_t>(p) * KVH + h) * DV + d] =
              L.use_mla ? keys[r][(static_cast<size_t>(p) * KVH + h) * D + d] : fresh();
        }
      }
    }
  }
  std::vector<int32_t> qsl(1, 0);
  for (int r = 0; r < B; ++r) qsl.push_back(qsl.back() + pb.q_lens[r]);
  const int T = qsl.back();

  HostTensor query(dt, {T, H, D});
  for (int64_t i = 0; i < query.view().numel(); ++i) {
    store_from_float(query.data(), dt, i, static_cast<float>(rng.uniform(pb.value_magnitude)));
  }
  HostTensor output(dt, {T, H, DV});
  nan_fill(output);

  CommonAttentionMetadata common;
  common.num_reqs = B;
  common.num_actual_tokens = T;
  common.query_start_loc = qsl;
  common.seq_lens.assign(pb.seq_lens.begin(), pb.seq_lens.end());
  common.causal = L.is_causal();
  common.max_query_len = *std::max_element(pb.q_lens.begin(), pb.q_lens.end());
  common.max_seq_len = *std::max_element(pb.seq_lens.begin(), pb.seq_lens.end());
  common.block_size = bs;

  PagedRun run;
  KvCacheTensors cache;
  HostTensor kc, vc, key, value;
  if (has_cache) {
    int total_blocks = 3;  // a few blocks no request uses
    for (int r = 0; r < B; ++r) {
      common.max_blocks_per_req =
          std::max(common.max_blocks_per_req, (pb.seq_lens[r] + bs - 1) / bs);
      total_blocks += (pb.seq_lens[r] + bs - 1) / bs;
    }
    common.max_blocks_per_req = std::max(common.max_blocks_per_req, 1);
    std::vector<int32_t> physical(static_cast<size_t>(total_blocks));
    std::iota(physical.begin(), physical.end(), 0);
    std::shuffle(physical.begin(), physical.end(), rng.gen);
    common.block_table.assign(static_cast<size_t>(B) * common.max_blocks_per_req, 0);
    size_t next = 0;
    for (int r = 0; r < B; ++r) {
      for (int b = 0; b < (pb.seq_lens[r] + bs - 1) / bs; ++b) {
        common.block_table[static_cast<size_t>(r) * common.max_blocks_per_req + b] =
            physical[next++];
      }
    }
    const bool nhd = pb.layout == KvLayout::kNHD;
    auto shape = [&](int dim) {
      return nhd ? std::vector<int64_t>{total_blocks, bs, KVH, dim}
                 : std::vector<int64_t>{total_blocks, KVH, bs, dim};
    };
    auto offset = [&](int block, int slot, int h, int d, int dim) -> int64_t {
      return nhd ? ((static_cast<int64_t>(block) * bs + slot) * KVH + h) * dim + d
                 : ((static_cast<int64_t>(block) * KVH + h) * bs + slot) * dim + d;
    };
    kc = HostTensor(kvt, shape(D));
    if (!L.use_mla) vc = HostTensor(kvt, shape(DV));
    // Garbage everywhere first: a kernel that reads past a request's keys is caught.
    for (int64_t i = 0; i < kc.view().numel(); ++i)
      store_from_float(kc.data(), kvt, i, static_cast<float>(rng.uniform(50.0)));
    if (!L.use_mla) {
      for (int64_t i = 0; i < vc.view().numel(); ++i)
        store_from_float(vc.data(), kvt, i, static_cast<float>(rng.uniform(50.0)));
    }
    HostTensor expected_k = kc.clone();
    HostTensor expected_v = L.use_mla ? HostTensor() : vc.clone();
    auto write = [&](const HostTensor& kt, const HostTensor& vt, int r, int p) {
      const int block =
          common.block_table[static_cast<size_t>(r) * common.max_blocks_per_req + p / bs];
      for (int h = 0; h < KVH; ++h) {
        for (int d = 0; d < D; ++d) {
          store_from_float(kt.data(), kvt, offset(block, p % bs, h, d, D),
                           static_cast<float>(keys[r][(static_cast<size_t>(p) * KVH + h) * D + d]) /
                               static_cast<float>(ks));
        }
        if (L.use_mla) continue;
        for (int d = 0; d < DV; ++d) {
          store_from_float(
              vt.data(), kvt, offset(block, p % bs, h, d, DV),
              static_cast<float>(values[r][(static_cast<size_t>(p) * KVH + h) * DV + d]) /
                  static_cast<float>(vs));
        }
      }
    };
    for (int r = 0; r < B; ++r) {
      const int context = cross ? pb.seq_lens[r] : pb.seq_lens[r] - pb.q_lens[r];
      for (int p = 0; p < pb.seq_lens[r]; ++p) {
        if (p < context) write(kc, vc, r, p);
        write(expected_k, expected_v, r, p);
      }
    }
    cache.key = kc.view();
    if (!L.use_mla) cache.value = vc.view();
    cache.layout = pb.layout;
    cache.block_size = bs;
    if (!cross) {
      key = HostTensor(dt, {T, KVH, D});
      if (!L.use_mla) value = HostTensor(dt, {T, KVH, DV});
      for (int r = 0; r < B; ++r) {
        for (int j = 0; j < pb.q_lens[r]; ++j) {
          const int p = pb.seq_lens[r] - pb.q_lens[r] + j;
          const int t = qsl[r] + j;
          const int block =
              common.block_table[static_cast<size_t>(r) * common.max_blocks_per_req + p / bs];
          common.slot_mapping.push_back(static_cast<int64_t>(block) * bs + p % bs);
          for (int h = 0; h < KVH; ++h) {
            for (int d = 0; d < D; ++d)
              store_from_float(
                  key.data(), dt, (static_cast<int64_t>(t) * KVH + h) * D + d,
                  static_cast<float>(keys[r][(static_cast<size_t>(p) * KVH + h) * D + d]));
            if (L.use_mla) continue;
            for (int d = 0; d < DV; ++d)
              store_from_float(
                  value.data(), dt, (static_cast<int64_t>(t) * KVH + h) * DV + d,
                  static_cast<float>(values[r][(static_cast<size_t>(p) * KVH + h) * DV + d]));
          }
        }
      }
    } else {
      common.slot_mapping.assign(static_cast<size_t>(T), -1);
    }
    // Expected cache bytes: key cache then value cache.
    auto append = [](std::vector<uint8_t>& dst, const HostTensor& t) {
      if (t.data() == nullptr) return;
      const auto* p = static_cast<const uint8_t*>(t.data());
      dst.insert(dst.end(), p, p + t.nbytes());
    };
    append(run.expected_cache_bytes, expected_k);
    append(run.expected_cache_bytes, expected_v);
  } else {
    // Encoder / encoder-only: the fresh rows are the whole sequence.
    key = HostTensor(dt, {T, KVH, D});
    value = HostTensor(dt, {T, KVH, DV});
    for (int r = 0; r < B; ++r) {
      for (int j = 0; j < pb.q_lens[r]; ++j) {
        const int t = qsl[r] + j;
        for (int i = 0; i < KVH * D; ++i)
          store_from_float(key.data(), dt, static_cast<int64_t>(t) * KVH * D + i,
                           static_cast<float>(keys[r][static_cast<size_t>(j) * KVH * D + i]));
        for (int i = 0; i < KVH * DV; ++i)
          store_from_float(value.data(), dt, static_cast<int64_t>(t) * KVH * DV + i,
                           static_cast<float>(values[r][static_cast<size_t>(j) * KVH * DV + i]));
      }
    }
  }

  auto backend = make_reference_backend();
  KvCacheSpec spec;
  spec.block_size = bs;
  auto builder = backend->make_builder(spec, L);
  auto impl = backend->make_impl(L);
  const AttentionMetadata& plan = builder->build(common);
  impl->forward(query.view(), key.view(), value.view(), cache, plan, output.view());

  run.out.resize(static_cast<size_t>(output.view().numel()));
  for (size_t i = 0; i < run.out.size(); ++i)
    run.out[i] = load_as_float(output.data(), dt, static_cast<int64_t>(i));
  if (has_cache) {
    auto append = [](std::vector<uint8_t>& dst, const HostTensor& t) {
      if (t.data() == nullptr) return;
      const auto* p = static_cast<const uint8_t*>(t.data());
      dst.insert(dst.end(), p, p + t.nbytes());
    };
    append(run.cache_bytes, kc);
    append(run.cache_bytes, vc);
  }

  // Dense oracle over exactly the values the cache holds.
  DenseShape shape;
  shape.num_heads = H;
  shape.num_kv_heads = KVH;
  shape.head_size = D;
  shape.head_size_v = DV;
  shape.scale = L.scale;
  shape.causal = L.is_causal();
  shape.sliding_window = L.sliding_window;
  shape.chunk_size = L.chunk_size;
  shape.soft_cap = L.soft_cap;
  shape.sinks.assign(L.sinks.begin(), L.sinks.end());
  for (int r = 0; r < B; ++r) {
    DenseRequest req;
    req.q_len = pb.q_lens[r];
    req.kv_len = pb.seq_lens[r];
    for (int i = qsl[r] * H * D; i < qsl[r + 1] * H * D; ++i)
      req.q.push_back(load_as_float(query.data(), dt, i));
    req.k = keys[r];
    req.v = values[r];
    if (has_cache) {
      for (double& x : req.k)
        x = static_cast<double>(round_trip(kvt, static_cast<float>(x) / static_cast<float>(ks))) *
            ks;
      for (double& x : req.v)
        x = static_cast<double>(round_trip(kvt, static_cast<float>(x) / static_cast<float>(vs))) *
            vs;
    }
    const std::vector<double> o = dense_attention(shape, req);
    run.expected.insert(run.expected.end(), o.begin(), o.end());
  }
  return run;
}

double tolerance_ratio(const std::vector<double>& a, const std::vector<double>& b, double rtol,
                       double atol) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double r = std::abs(a[i] - b[i]) / (atol + rtol * std::abs(b[i]));
    if (!(r <= worst)) worst = std::isnan(r) ? INFINITY : std::max(worst, r);
  }
  return worst;
}

double output_rtol(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return 1e-5;
    case DType::kFloat16:
      return 1e-3;
    case DType::kBFloat16:
      return 8e-3;
  }
  return 0;
}

}  // namespace attnkit::testing
