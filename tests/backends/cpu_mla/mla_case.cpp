#include "mla_case.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "attnkit/core/numeric.h"

namespace attnkit::testing {
namespace {

// Random values in [-1, 1) stored as `dtype`.
HostTensor random_tensor(ScalarType dtype, std::initializer_list<int64_t> shape,
                         std::mt19937_64& gen) {
  HostTensor t(dtype, shape);
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int64_t i = 0; i < n; ++i) {
    const float x = dist(gen);
    switch (dtype) {
      case ScalarType::kFloat16:
        t.data_as<uint16_t>()[i] = float_to_half_bits(x);
        break;
      case ScalarType::kBFloat16:
        t.data_as<uint16_t>()[i] = float_to_bf16_bits(x);
        break;
      default:
        t.data_as<float>()[i] = x;
        break;
    }
  }
  return t;
}

float read(const HostTensor& t, ScalarType dtype, int64_t i) {
  switch (dtype) {
    case ScalarType::kFloat16:
      return half_bits_to_float(t.data_as<uint16_t>()[i]);
    case ScalarType::kBFloat16:
      return bf16_bits_to_float(t.data_as<uint16_t>()[i]);
    default:
      return t.data_as<float>()[i];
  }
}

}  // namespace

AttentionLayerParams mla_layer(const MlaCase& c) {
  AttentionLayerParams layer;
  layer.kind = c.sliding_window > 0 ? KvCacheKind::kSlidingWindowMla : KvCacheKind::kMlaAttention;
  layer.num_heads = c.num_heads;
  layer.num_kv_heads = 1;
  layer.head_size = kLatent;
  layer.head_size_v = kLora;
  layer.scale = 1.0f / std::sqrt(192.0f);  // DeepSeek's qk_nope 128 + rope 64
  layer.sliding_window = c.sliding_window;
  layer.dtype = c.dtype;
  layer.kv_cache_dtype = c.kv_dtype;
  layer.k_scale = c.k_scale;
  layer.v_scale = c.k_scale;
  layer.use_mla = true;
  layer.mla_rope_dim = 64;
  return layer;
}

std::vector<float> run_mla_case(const AttentionBackend& backend, const MlaCase& c) {
  std::mt19937_64 gen(c.seed);
  const AttentionLayerParams layer = mla_layer(c);
  const ScalarType dtype = scalar_type_of(c.dtype);
  const ScalarType kv = scalar_type_of(c.kv_dtype, c.dtype);
  const int num_reqs = static_cast<int>(c.requests.size());
  int max_blocks = 1;
  for (const MlaRequest& r : c.requests) {
    max_blocks = std::max(max_blocks, (r.seq_len + c.block_size - 1) / c.block_size);
  }
  // Physical blocks in a scrambled order shared out to the requests.
  const int num_blocks = num_reqs * max_blocks + 3;
  std::vector<int32_t> order(static_cast<size_t>(num_blocks));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), gen);
  HostTensor cache_key(kv, {num_blocks, c.block_size, 1, kLatent});
  std::fill_n(static_cast<char*>(cache_key.data()), cache_key.nbytes(), 0);
  KvCacheTensors cache;
  cache.key = cache_key.view();
  cache.block_size = c.block_size;

  auto builder = backend.make_builder(KvCacheSpec{}, layer);
  auto impl = backend.make_impl(layer);

  // One step writing everything but the new tokens (the history), then the case's step.
  for (int step = 0; step < 2; ++step) {
    CommonAttentionMetadata common;
    common.num_reqs = num_reqs;
    common.query_start_loc.push_back(0);
    common.max_blocks_per_req = max_blocks;
    common.block_size = c.block_size;
    for (int i = 0; i < num_reqs; ++i) {
      const MlaRequest& r = c.requests[static_cast<size_t>(i)];
      const int hist = r.seq_len - r.q_len;
      const int seq = step == 0 ? hist : r.seq_len;
      // The history step writes all `hist` latent rows but asks only for its last query
      // (cheap for the oracle); the case's step writes and queries its q_len tokens.
      const int written = step == 0 ? hist : r.q_len;
      const int q_len = step == 0 ? std::min(hist, 1) : r.q_len;
      for (int b = 0; b < max_blocks; ++b) {
        common.block_table.push_back(order[static_cast<size_t>(i * max_blocks + b)]);
      }
      for (int k = seq - written; k < seq; ++k) {
        common.slot_mapping.push_back(
            int64_t{order[static_cast<size_t>(i * max_blocks + k / c.block_size)]} * c.block_size +
            k % c.block_size);
      }
      common.query_start_loc.push_back(common.query_start_loc.back() + q_len);
      common.seq_lens.push_back(seq);
      common.max_query_len = std::max(common.max_query_len, q_len);
      common.max_seq_len = std::max(common.max_seq_len, seq);
    }
    const int tokens = common.query_start_loc.back();
    common.num_actual_tokens = tokens;
    HostTensor query = random_tensor(dtype, {tokens, c.num_heads, kLatent}, gen);
    const auto rows = static_cast<int64_t>(common.slot_mapping.size());
    HostTensor key = random_tensor(dtype, {std::max<int64_t>(rows, 1), 1, kLatent}, gen);
    HostTensor out(dtype, {tokens, c.num_heads, kLora});
    impl->forward(query.view(), key.view(), TensorView{}, cache, builder->build(common),
                  out.view());
    if (step == 1) {
      std::vector<float> result(static_cast<size_t>(tokens) * c.num_heads * kLora);
      for (size_t i = 0; i < result.size(); ++i) {
        result[i] = read(out, dtype, static_cast<int64_t>(i));
      }
      return result;
    }
  }
  return {};
}

}  // namespace attnkit::testing
