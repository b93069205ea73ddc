// The CPU backends' steady state: once a builder has built a step's metadata, forward()
// makes no C++ heap allocation, however the step splits (split-KV decode with its partial
// results, several requests, a prefill chunk beside decodes): what a step needs beyond the
// last one is grown by build(), which an engine runs once per step for all its layers. Each
// thread's kernel scratch (kernels/cpu/thread_scratch.h) grows on its first need, outside
// the C++ heap. Each step shape is counted right after a short one-request step on the
// same builder, so whatever it needs more is new to it. The output is filled with NaN
// before and must be finite after: the counted forward really ran. The layers run
// unchecked: the checked mode (the Debug builds' default, backend/forward_check.h) sorts a
// copy of the slot mapping to find slots written twice.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "allocation_counter.h"
#include "attnkit/backend/backend.h"
#include "attnkit/core/numeric.h"
#include "attnkit/core/tensor.h"
#include "backends/cpu_flash/cpu_flash_backend.h"
#include "backends/cpu_mla/cpu_mla_backend.h"

namespace attnkit::testing {
namespace {

struct StepShape {
  std::string name;
  std::vector<int> q_lens, seq_lens;
};

// Step shapes of both tests: one long request (split across threads), several requests of
// mixed lengths, and a prefill chunk beside two decodes.
std::vector<StepShape> step_shapes() {
  return {{"decode b1 ctx4096", {1}, {4096}},
          {"decode b4 mixed", {1, 1, 1, 1}, {300, 1000, 17, 2048}},
          {"prefill chunk + decodes", {128, 1, 1}, {512, 700, 64}}};
}

void fill_random_bf16(HostTensor& t, std::mt19937& gen) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto* data = static_cast<uint16_t*>(t.data());
  for (int64_t i = 0; i < t.view().numel(); ++i) data[i] = float_to_bf16_bits(dist(gen));
}

// The geometry of one backend's layer and cache (bf16 queries and cache, NHD).
struct Geometry {
  int heads, kv_heads, head_size, head_size_v, block_size;
  bool mla;
};

// Runs `shape` through `builder` and `impl` (a new build(), then forward()) and returns
// the heap allocations forward() made.
int64_t forward_allocations(MetadataBuilder& builder, AttentionImpl& impl, const Geometry& g,
                            const StepShape& shape, std::mt19937& gen) {
  const int reqs = static_cast<int>(shape.seq_lens.size());
  int max_blocks = 0;
  for (int s : shape.seq_lens)
    max_blocks = std::max(max_blocks, (s + g.block_size - 1) / g.block_size);
  const int num_blocks = reqs * max_blocks + 1;
  std::vector<int32_t> order(static_cast<size_t>(num_blocks));
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), gen);

  CommonAttentionMetadata common;
  common.num_reqs = reqs;
  common.block_size = g.block_size;
  common.max_blocks_per_req = max_blocks;
  common.query_start_loc.push_back(0);
  for (int i = 0; i < reqs; ++i) {
    const int q = shape.q_lens[static_cast<size_t>(i)], s = shape.seq_lens[static_cast<size_t>(i)];
    for (int b = 0; b < max_blocks; ++b) {
      common.block_table.push_back(order[static_cast<size_t>(i * max_blocks + b)]);
    }
    for (int k = s - q; k < s; ++k) {
      common.slot_mapping.push_back(
          int64_t{order[static_cast<size_t>(i * max_blocks + k / g.block_size)]} * g.block_size +
          k % g.block_size);
    }
    common.query_start_loc.push_back(common.query_start_loc.back() + q);
    common.seq_lens.push_back(s);
    common.max_query_len = std::max(common.max_query_len, q);
    common.max_seq_len = std::max(common.max_seq_len, s);
  }
  const int tokens = common.query_start_loc.back();
  common.num_actual_tokens = tokens;

  const ScalarType bf16 = ScalarType::kBFloat16;
  HostTensor key_cache(bf16, {num_blocks, g.block_size, g.kv_heads, g.head_size});
  HostTensor value_cache;
  fill_random_bf16(key_cache, gen);
  KvCacheTensors cache;
  cache.layout = KvLayout::kNHD;
  cache.block_size = g.block_size;
  cache.key = key_cache.view();
  if (!g.mla) {
    value_cache = HostTensor(bf16, {num_blocks, g.block_size, g.kv_heads, g.head_size_v});
    fill_random_bf16(value_cache, gen);
    cache.value = value_cache.view();
  }
  HostTensor query(bf16, {tokens, g.heads, g.head_size});
  HostTensor key(bf16, {tokens, g.kv_heads, g.head_size});
  HostTensor value;
  fill_random_bf16(query, gen);
  fill_random_bf16(key, gen);
  if (!g.mla) {
    value = HostTensor(bf16, {tokens, g.kv_heads, g.head_size_v});
    fill_random_bf16(value, gen);
  }
  HostTensor out(bf16, {tokens, g.heads, g.head_size_v});
  auto* o = static_cast<uint16_t*>(out.data());
  const int64_t n = out.view().numel();

  const TensorView v = g.mla ? TensorView{} : value.view();
  const AttentionMetadata& meta = builder.build(common);
  std::fill_n(o, n, float_to_bf16_bits(std::numeric_limits<float>::quiet_NaN()));
  int64_t allocations = 0;
  {
    const CountAllocations counter;
    impl.forward(query.view(), key.view(), v, cache, meta, out.view());
    allocations = counter.count();
  }
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(bf16_bits_to_float(o[i]))) {
      ADD_FAILURE() << shape.name << ": output element " << i << " not written";
      break;
    }
  }
  return allocations;
}

void expect_no_forward_allocations(const AttentionBackend& backend,
                                   const AttentionLayerParams& layer, const Geometry& g,
                                   uint32_t seed) {
  std::mt19937 gen(seed);
  KvCacheSpec spec;
  spec.block_size = g.block_size;
  spec.num_kv_heads = g.kv_heads;
  spec.head_size = g.head_size;
  spec.head_size_v = g.mla ? 0 : g.head_size_v;
  spec.dtype = ScalarType::kBFloat16;
  auto builder = backend.make_builder(spec, layer);
  auto impl = backend.make_impl(layer);
  const StepShape short_step{"decode b1 ctx64", {1}, {64}};
  for (const StepShape& shape : step_shapes()) {
    forward_allocations(*builder, *impl, g, short_step, gen);
    EXPECT_EQ(forward_allocations(*builder, *impl, g, shape, gen), 0) << shape.name;
  }
}

TEST(CpuSteadyState, CpuFlashForwardAllocatesNothing) {
  const auto backend = make_cpu_flash_backend();
  AttentionLayerParams layer;
  layer.num_heads = 32;
  layer.num_kv_heads = 8;
  layer.head_size = layer.head_size_v = 128;
  layer.scale = 1.0f / std::sqrt(128.0f);
  layer.dtype = DType::kBFloat16;
  layer.kv_cache_dtype = KvCacheDType::kBFloat16;
  layer.checked = false;
  expect_no_forward_allocations(*backend, layer, {32, 8, 128, 128, 16, false}, 2024);
}

TEST(CpuSteadyState, CpuMlaForwardAllocatesNothing) {
  const auto backend = make_cpu_mla_backend();
  AttentionLayerParams layer;
  layer.num_heads = 16;
  layer.num_kv_heads = 1;
  layer.head_size = 576;
  layer.head_size_v = 512;
  layer.use_mla = true;
  layer.mla_rope_dim = 64;
  layer.scale = 0.07f;
  layer.dtype = DType::kBFloat16;
  layer.kv_cache_dtype = KvCacheDType::kBFloat16;
  layer.checked = false;
  expect_no_forward_allocations(*backend, layer, {16, 1, 576, 512, 64, true}, 2025);
}

}  // namespace
}  // namespace attnkit::testing
