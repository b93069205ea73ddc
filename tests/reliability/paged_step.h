#pragma once
// One valid forward() step over a paged KV cache, for every CPU backend, that tests break
// or feed extreme values. Three requests, fp32, random inputs (seeded):
//   request 0: decode, seq_len 6, 1 new token      (query row 0)
//   request 1: prefill chunk, seq_len 7, 3 new     (query rows 1..3)
//   request 2: no new tokens this step, seq_len 5  (no query rows)
// Blocks of 4 tokens; two blocks per request, scrambled physical ids 1..6 of an 8-block
// pool (0 is the null block, 7 is spare). The whole cache starts random (the history);
// forward() writes the 4 fresh K/V rows at the slot mapping of their positions.
// Standard layers: 4 query heads over 2 KV heads (GQA), head size 16. MLA layers: 2 heads
// over a 576-wide latent (V = its first 512 elements), key [4, 1, 576], no value.

#include <algorithm>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "attnkit/backend/backend.h"
#include "attnkit/core/error.h"
#include "attnkit/core/numeric.h"
#include "attnkit/core/tensor.h"
#include "backends/cpu_flash/cpu_flash_backend.h"
#include "backends/cpu_mla/cpu_mla_backend.h"
#include "backends/reference/reference_backend.h"

namespace attnkit::testing {

inline std::unique_ptr<AttentionBackend> make_cpu_backend(std::string_view name) {
  if (name == "CPU_FLASH") return make_cpu_flash_backend();
  if (name == "CPU_MLA") return make_cpu_mla_backend();
  return make_reference_backend();
}

inline void fill_random(const HostTensor& t, std::mt19937_64& gen, float amplitude = 1.0f) {
  std::uniform_real_distribution<float> dist(-amplitude, amplitude);
  const int64_t n = t.view().numel();
  for (int64_t i = 0; i < n; ++i) store_from_float(t.data(), t.view().dtype, i, dist(gen));
}

struct PagedStep {
  static constexpr int kBlockSize = 4, kNumBlocks = 8, kTokens = 4;
  // What the output holds before a step writes it.
  static constexpr float kUnwritten = -1234.5f;

  std::unique_ptr<AttentionBackend> backend;
  AttentionLayerParams layer;
  HostTensor q, k, v, out, key_cache, value_cache;
  // Views a test may break (they start as views of the tensors above).
  TensorView query, key, value, output;
  KvCacheTensors cache;
  CommonAttentionMetadata common;

  explicit PagedStep(std::string_view backend_name, bool mla = false, uint64_t seed = 7)
      : backend(make_cpu_backend(backend_name)) {
    layer.dtype = DType::kFloat32;
    layer.use_mla = mla;
    layer.num_heads = mla ? 2 : 4;
    layer.num_kv_heads = mla ? 1 : 2;
    layer.head_size = mla ? 576 : 16;
    layer.head_size_v = mla ? 512 : 16;
    layer.mla_rope_dim = mla ? 64 : 0;
    layer.scale = 1.0f / 4.0f;
    const int H = layer.num_heads, KV = layer.num_kv_heads;
    const int D = layer.head_size, DV = layer.head_size_v;
    q = HostTensor(ScalarType::kFloat32, {kTokens, H, D});
    k = HostTensor(ScalarType::kFloat32, {kTokens, KV, D});
    out = HostTensor(ScalarType::kFloat32, {kTokens, H, DV});
    key_cache = HostTensor(ScalarType::kFloat32, {kNumBlocks, kBlockSize, KV, D});
    std::mt19937_64 gen(seed);
    fill_random(q, gen);
    fill_random(k, gen);
    fill_random(key_cache, gen);
    if (!mla) {
      v = HostTensor(ScalarType::kFloat32, {kTokens, KV, DV});
      value_cache = HostTensor(ScalarType::kFloat32, {kNumBlocks, kBlockSize, KV, DV});
      fill_random(v, gen);
      fill_random(value_cache, gen);
      value = v.view();
      cache.value = value_cache.view();
    }
    // A known pattern, not whatever the allocator left: a test that compares outputs a
    // step must not write compares this.
    std::fill_n(static_cast<float*>(out.data()), out.view().numel(), kUnwritten);
    query = q.view();
    key = k.view();
    output = out.view();
    cache.key = key_cache.view();
    cache.block_size = kBlockSize;

    common.num_reqs = 3;
    common.query_start_loc = {0, 1, 4, 4};
    common.seq_lens = {6, 7, 5};
    common.num_actual_tokens = kTokens;
    common.max_blocks_per_req = 2;
    common.block_size = kBlockSize;
    common.block_table = {5, 2, 3, 6, 1, 4};
    common.max_query_len = 3;
    common.max_seq_len = 7;
    // Fresh rows at their positions: request 0 position 5, request 1 positions 4..6.
    common.slot_mapping = {slot(0, 5), slot(1, 4), slot(1, 5), slot(1, 6)};
  }

  int64_t slot(int request, int position) const {
    const int32_t block = common.block_table[static_cast<size_t>(
        request * common.max_blocks_per_req + position / kBlockSize)];
    return int64_t{block} * kBlockSize + position % kBlockSize;
  }

  // Builds the plan from the metadata as it is now, then runs forward().
  void run() {
    auto builder = backend->make_builder(KvCacheSpec{}, layer);
    const AttentionMetadata& plan = builder->build(common);
    backend->make_impl(layer)->forward(query, key, value, cache, plan, output);
  }

  // Builds the plan from the metadata as it is now, applies `break_it`, then runs
  // forward(): the message of the Error it throws, or "" when none.
  template <typename F>
  std::string error_after(F break_it) {
    try {
      auto builder = backend->make_builder(KvCacheSpec{}, layer);
      const AttentionMetadata& plan = builder->build(common);
      break_it(*this);
      backend->make_impl(layer)->forward(query, key, value, cache, plan, output);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  std::vector<float> output_values() const {
    std::vector<float> values(static_cast<size_t>(out.view().numel()));
    for (size_t i = 0; i < values.size(); ++i) {
      values[i] = load_as_float(out.data(), out.view().dtype, static_cast<int64_t>(i));
    }
    return values;
  }
};

}  // namespace attnkit::testing
