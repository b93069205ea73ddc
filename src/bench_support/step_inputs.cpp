#include "bench_support/step_inputs.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>

#include "attnkit/core/error.h"
#include "attnkit/core/numeric.h"

namespace attnkit::bench {
namespace {

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

}  // namespace

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

StepInputs::StepInputs(const BenchShape& s, KvLayout /*layout*/, bool allocate_cache, bool rotate) {
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
  layer.kv_cache_dtype = s.kv_cache_dtype;
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
  const int layers =
      rotate ? std::clamp(static_cast<int>(std::ceil(kMinRotatedBytes / layer_bytes)), 1, 64) : 1;
  for (int l = 0; l < layers; ++l) {
    k_layers.emplace_back(static_cast<size_t>(layer_bytes / 2));
    v_layers.emplace_back(static_cast<size_t>(layer_bytes / 2));
    fill_random(k_layers.back(), kt, 10 + 2 * static_cast<uint64_t>(l));
    fill_random(v_layers.back(), kt, 11 + 2 * static_cast<uint64_t>(l));
  }
}

}  // namespace attnkit::bench
