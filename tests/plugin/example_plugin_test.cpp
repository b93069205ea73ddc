// The example plugin (examples/plugin_backend) loaded through the loader: its declared
// capabilities, its combination hook, and its attention and cache update on random paged
// batches against an independent double-precision computation of the kernel contract
// (attnkit/kernels/paged_attention_params.h).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "attnkit/core/numeric.h"
#include "attnkit/core/tensor.h"
#include "attnkit/plugin/plugin_loader.h"
#include "plugin/plugin_test_util.h"

namespace attnkit {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const std::string kExample = ATTNKIT_EXAMPLE_PLUGIN_PATH;

std::shared_ptr<const AttentionBackend> load_example(BackendRegistry& registry) {
  const PluginLoadReport report = load_plugin(kExample, registry);
  EXPECT_THAT(report.registered, ElementsAre("EXAMPLE_CPU"));
  EXPECT_EQ(report.plugin_name, "attnkit-example-backend");
  return registry.get("EXAMPLE_CPU");
}

TEST(ExamplePlugin, DeclaresItsCapabilitySubset) {
  BackendRegistry registry(BackendRegistry::Contents::kEmpty);
  const auto backend = load_example(registry);
  const BackendCapabilities& caps = backend->capabilities();
  EXPECT_THAT(caps.dtypes, ElementsAre(DType::kFloat32, DType::kFloat16, DType::kBFloat16));
  EXPECT_THAT(caps.kv_cache_dtypes, IsEmpty());
  EXPECT_EQ(caps.head_sizes.describe(), "multiples of 8 up to 256");
  EXPECT_THAT(caps.attention_types, ElementsAre(AttentionType::kDecoder));
  EXPECT_TRUE(caps.sliding_window);
  EXPECT_FALSE(caps.sinks || caps.soft_cap || caps.chunked_local || caps.mla);
  EXPECT_EQ(backend->kv_layout(), KvLayout::kNHD);

  SelectorConfig config;
  config.head_size = config.head_size_v = 128;
  config.sliding_window = 512;
  EXPECT_TRUE(backend->validate(config, cpu_platform()).empty());
  config.num_heads = 12;
  config.num_kv_heads = 5;
  config.kv_cache_dtype = KvCacheDType::kFp8E4M3;
  EXPECT_THAT(backend->validate(config, cpu_platform()),
              ElementsAre(HasSubstr("kv_cache_dtype fp8_e4m3 not supported"),
                          "num_heads 12 is not a multiple of num_kv_heads 5"));
}

struct Case {
  DType dtype;
  int head_size;
  int sliding_window;
  int block_size;
};

class ExamplePluginAttention : public ::testing::TestWithParam<Case> {};

// One step over three requests (a decode, a fresh prefill, a prefill chunk after a
// context), cache blocks in random physical order, unused slots full of large garbage.
TEST_P(ExamplePluginAttention, MatchesTheKernelContract) {
  const Case c = GetParam();
  const int num_heads = 8, num_kv_heads = 2, d = c.head_size, bs = c.block_size;
  const std::vector<int> q_lens = {1, 20, 5};
  const std::vector<int> seq_lens = {37, 20, 50};
  const int num_reqs = 3;
  const ScalarType st = scalar_type_of(c.dtype);
  std::mt19937 rng(1234 + c.head_size + c.block_size);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);

  BackendRegistry registry(BackendRegistry::Contents::kEmpty);
  const auto backend = load_example(registry);

  CommonAttentionMetadata m;
  m.num_reqs = num_reqs;
  m.block_size = bs;
  m.query_start_loc = {0};
  for (int i = 0; i < num_reqs; ++i) m.query_start_loc.push_back(m.query_start_loc[i] + q_lens[i]);
  m.num_actual_tokens = m.query_start_loc.back();
  m.seq_lens = seq_lens;
  m.max_query_len = 20;
  m.max_seq_len = 50;
  m.max_blocks_per_req = (50 + bs - 1) / bs;
  const int num_blocks = num_reqs * m.max_blocks_per_req + 1;
  std::vector<int32_t> physical(static_cast<size_t>(num_blocks - 1));
  std::iota(physical.begin(), physical.end(), 1);  // block 0 stays the null block
  std::shuffle(physical.begin(), physical.end(), rng);
  m.block_table.assign(static_cast<size_t>(num_reqs * m.max_blocks_per_req), 0);
  for (size_t i = 0; i < m.block_table.size(); ++i) m.block_table[i] = physical[i];
  const int tokens = m.num_actual_tokens;

  HostTensor q(st, {tokens, num_heads, d}), out(st, {tokens, num_heads, d});
  HostTensor k(st, {tokens, num_kv_heads, d}), v(st, {tokens, num_kv_heads, d});
  HostTensor kc(st, {num_blocks, bs, num_kv_heads, d}), vc(st, {num_blocks, bs, num_kv_heads, d});
  auto fill = [&](const HostTensor& t, float scale) {
    for (int64_t i = 0; i < t.view().numel(); ++i)
      store_from_float(t.data(), st, i, scale * uni(rng));
  };
  fill(q, 1.0f);
  fill(k, 1.0f);
  fill(v, 1.0f);
  fill(kc, 1000.0f);  // garbage: every slot not part of a sequence must stay unread
  fill(vc, 1000.0f);
  for (int64_t i = 0; i < out.view().numel(); ++i) store_from_float(out.data(), st, i, NAN);

  // Cache slot of key position p of request r; fill the earlier context with real values.
  auto slot = [&](int r, int p) -> int64_t {
    return int64_t{m.block_table[static_cast<size_t>(r * m.max_blocks_per_req + p / bs)]} * bs +
           p % bs;
  };
  const int64_t row = int64_t{num_kv_heads} * d;
  for (int r = 0; r < num_reqs; ++r) {
    for (int p = 0; p < seq_lens[r] - q_lens[r]; ++p) {
      for (int64_t e = 0; e < row; ++e) {
        store_from_float(kc.data(), st, slot(r, p) * row + e, uni(rng));
        store_from_float(vc.data(), st, slot(r, p) * row + e, uni(rng));
      }
    }
    for (int j = 0; j < q_lens[r]; ++j) {
      m.slot_mapping.push_back(slot(r, seq_lens[r] - q_lens[r] + j));
    }
  }

  AttentionLayerParams layer;
  layer.num_heads = num_heads;
  layer.num_kv_heads = num_kv_heads;
  layer.head_size = layer.head_size_v = d;
  layer.scale = 1.0f / std::sqrt(static_cast<float>(d));
  layer.sliding_window = c.sliding_window;
  layer.kind = c.sliding_window ? KvCacheKind::kSlidingWindow : KvCacheKind::kFullAttention;
  layer.dtype = c.dtype;
  KvCacheSpec spec;
  spec.block_size = bs;
  spec.num_kv_heads = num_kv_heads;
  spec.head_size = spec.head_size_v = d;
  spec.dtype = st;
  auto builder = backend->make_builder(spec, layer);
  auto impl = backend->make_impl(layer);
  const KvCacheTensors cache{kc.view(), vc.view(), KvLayout::kNHD, bs};
  impl->forward(q.view(), k.view(), v.view(), cache, builder->build(m), out.view());

  // The fresh rows are in the cache, bit for bit (same dtype).
  for (int t = 0; t < tokens; ++t) {
    for (int64_t e = 0; e < row; ++e) {
      ASSERT_EQ(load_as_float(kc.data(), st, m.slot_mapping[t] * row + e),
                load_as_float(k.data(), st, t * row + e));
      ASSERT_EQ(load_as_float(vc.data(), st, m.slot_mapping[t] * row + e),
                load_as_float(v.data(), st, t * row + e));
    }
  }
  // Output against a double-precision evaluation of the contract over the cache contents.
  double err2 = 0, ref2 = 0;
  for (int r = 0; r < num_reqs; ++r) {
    for (int j = 0; j < q_lens[r]; ++j) {
      const int t = m.query_start_loc[r] + j;
      const int p = seq_lens[r] - q_lens[r] + j;
      const int first = c.sliding_window ? std::max(0, p - c.sliding_window + 1) : 0;
      for (int h = 0; h < num_heads; ++h) {
        const int kvh = h / (num_heads / num_kv_heads);
        std::vector<double> s;
        for (int key = first; key <= p; ++key) {
          double dot = 0;
          for (int e = 0; e < d; ++e) {
            dot += double{load_as_float(q.data(), st, (int64_t{t} * num_heads + h) * d + e)} *
                   load_as_float(kc.data(), st, slot(r, key) * row + kvh * d + e);
          }
          s.push_back(dot * layer.scale);
        }
        double mx = -INFINITY;
        for (double x : s) mx = std::max(mx, x);
        double den = 0;
        for (double& x : s) den += (x = std::exp(x - mx));
        for (int e = 0; e < d; ++e) {
          double acc = 0;
          for (int key = first; key <= p; ++key) {
            acc += s[static_cast<size_t>(key - first)] *
                   load_as_float(vc.data(), st, slot(r, key) * row + kvh * d + e);
          }
          const double want = acc / den;
          const double got = load_as_float(out.data(), st, (int64_t{t} * num_heads + h) * d + e);
          ASSERT_FALSE(std::isnan(got)) << "output element not written";
          err2 += (got - want) * (got - want);
          ref2 += want * want;
        }
      }
    }
  }
  const double tolerance = c.dtype == DType::kFloat32 ? 1e-5 : 1e-2;
  EXPECT_LT(std::sqrt(err2 / ref2), tolerance);
}

INSTANTIATE_TEST_SUITE_P(Cases, ExamplePluginAttention,
                         ::testing::Values(Case{DType::kFloat32, 64, 0, 16},
                                           Case{DType::kBFloat16, 128, 0, 16},
                                           Case{DType::kFloat16, 40, 16, 8},
                                           Case{DType::kFloat32, 256, 7, 32}));

// The plugin refuses a layer it cannot run (impl_create); a bad forward input is refused by
// the host's forward checks before the plugin sees it.
TEST(ExamplePlugin, BadInputIsAnErrorNamingTheValue) {
  BackendRegistry registry(BackendRegistry::Contents::kEmpty);
  const auto backend = load_example(registry);
  AttentionLayerParams layer;
  layer.num_heads = layer.num_kv_heads = 1;
  layer.head_size = layer.head_size_v = 12;  // not a multiple of 8
  layer.dtype = DType::kFloat32;
  const Error e = testing::plugin_error_of([&] { backend->make_impl(layer); });
  EXPECT_EQ(e.code(), ErrorCode::kPluginError);
  EXPECT_THAT(e.what(), HasSubstr("impl_create: unsupported: EXAMPLE_CPU: unsupported shape"));

  layer.head_size = layer.head_size_v = 8;
  KvCacheSpec spec;
  auto builder = backend->make_builder(spec, layer);
  auto impl = backend->make_impl(layer);
  CommonAttentionMetadata m;
  m.num_reqs = 1;
  m.num_actual_tokens = 1;
  m.query_start_loc = {0, 1};
  m.seq_lens = {1};
  m.block_table = {5};  // the cache below has 2 blocks
  m.max_blocks_per_req = 1;
  m.block_size = 4;
  m.slot_mapping = {1};
  HostTensor q(ScalarType::kFloat32, {1, 1, 8}), kc(ScalarType::kFloat32, {2, 4, 1, 8});
  HostTensor vc(ScalarType::kFloat32, {2, 4, 1, 8});
  const KvCacheTensors cache{kc.view(), vc.view(), KvLayout::kNHD, 4};
  const Error bad = testing::plugin_error_of(
      [&] { impl->forward(q.view(), q.view(), q.view(), cache, builder->build(m), q.view()); });
  EXPECT_EQ(bad.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(bad.what(),
              HasSubstr("EXAMPLE_CPU: block_table[0][0] = 5 is outside the cache (0..1)"));
}

}  // namespace
}  // namespace attnkit
