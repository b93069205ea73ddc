// The REFERENCE backend's declaration (it serves every configuration on CPU) and every
// error a caller can cause through its builder and implementation.

#include "backends/reference/reference_backend.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <string>

#include "attnkit/core/error.h"
#include "attnkit/core/tensor.h"

namespace attnkit {
namespace {

TEST(ReferenceBackend, NameAndDeclaredCapabilitiesCoverEveryConfiguration) {
  auto backend = make_reference_backend();
  EXPECT_EQ(backend->name(), "REFERENCE");
  const Platform cpu = cpu_platform();
  for (DType dtype : all_values<DType>()) {
    for (KvCacheDType kv : all_values<KvCacheDType>()) {
      for (AttentionType type : all_values<AttentionType>()) {
        SelectorConfig c;
        c.dtype = dtype;
        c.kv_cache_dtype = kv;
        c.attn_type = type;
        c.head_size = 72;
        c.head_size_v = 40;
        c.block_size = 7;
        c.sliding_window = 100;
        c.chunk_size = 64;
        c.soft_cap = 30.0f;
        c.has_sinks = true;
        c.batch_invariant = true;
        EXPECT_TRUE(backend->validate(c, cpu).empty()) << c.describe();
      }
    }
  }
  SelectorConfig mla;
  mla.use_mla = true;
  mla.head_size = 576;
  mla.head_size_v = 512;
  mla.mla_rope_dim = 64;
  mla.kv_cache_dtype = KvCacheDType::kFp8E5M2;
  EXPECT_TRUE(backend->validate(mla, cpu).empty());
  EXPECT_FALSE(backend->validate(mla, parse_platform("cuda:9.0")).empty());
  EXPECT_EQ(backend->kv_layout(), KvLayout::kNHD);
}

void expect_error(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no Error thrown; expected one mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(ReferenceBackend, MakeImplRejectsInconsistentLayers) {
  auto backend = make_reference_backend();
  AttentionLayerParams layer;
  layer.num_heads = 6;
  layer.num_kv_heads = 4;
  layer.head_size = layer.head_size_v = 8;
  expect_error([&] { backend->make_impl(layer); },
               "num_heads 6 is not a multiple of num_kv_heads 4");
  layer.num_kv_heads = 2;
  layer.sinks = {1.0f};
  expect_error([&] { backend->make_impl(layer); }, "sinks has 1 entries, expected num_heads = 6");
  layer.sinks.clear();
  layer.use_mla = true;
  expect_error([&] { backend->make_impl(layer); }, "MLA layers have num_kv_heads 1, got 2");
  layer.use_mla = false;
  layer.sliding_window = -3;
  expect_error([&] { backend->make_impl(layer); }, "sliding_window -3");
}

// A valid decoder step (2 heads, 1 KV head, head 4, blocks of 2) that each test breaks.
struct Step {
  AttentionLayerParams layer;
  HostTensor q{ScalarType::kFloat32, {2, 2, 4}};
  HostTensor k{ScalarType::kFloat32, {2, 1, 4}};
  HostTensor v{ScalarType::kFloat32, {2, 1, 4}};
  HostTensor out{ScalarType::kFloat32, {2, 2, 4}};
  HostTensor kc{ScalarType::kFloat32, {4, 2, 1, 4}};
  HostTensor vc{ScalarType::kFloat32, {4, 2, 1, 4}};
  KvCacheTensors cache;
  CommonAttentionMetadata common;
  std::unique_ptr<AttentionBackend> backend = make_reference_backend();

  Step() {
    // Fresh random inputs: a step over memory nothing wrote reads NaN under
    // ATTNKIT_POISON_MEMORY, and checked mode rightly refuses it.
    std::mt19937 gen(7);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (HostTensor* t : {&q, &k, &v, &kc, &vc}) {
      auto* data = static_cast<float*>(t->data());
      for (int64_t i = 0; i < t->view().numel(); ++i) data[i] = dist(gen);
    }
    layer.num_heads = 2;
    layer.num_kv_heads = 1;
    layer.head_size = layer.head_size_v = 4;
    layer.dtype = DType::kFloat32;
    cache.key = kc.view();
    cache.value = vc.view();
    cache.block_size = 2;
    common.num_reqs = 1;
    common.num_actual_tokens = 2;
    common.query_start_loc = {0, 2};
    common.seq_lens = {3};
    common.block_table = {3, 1};
    common.max_blocks_per_req = 2;
    common.block_size = 2;
    common.slot_mapping = {7, 2};
  }
  void run(const TensorView& query) {
    auto builder = backend->make_builder(KvCacheSpec{}, layer);
    backend->make_impl(layer)->forward(query, k.view(), v.view(), cache, builder->build(common),
                                       out.view());
  }
  void run() { run(q.view()); }
};

TEST(ReferenceBackend, ForwardRunsOnAValidStep) {
  Step s;
  EXPECT_NO_THROW(s.run());
}

TEST(ReferenceBackend, ForwardNamesBadInputs) {
  {
    Step s;
    HostTensor q16(ScalarType::kFloat16, {2, 2, 4});
    expect_error([&] { s.run(q16.view()); }, "query has dtype float16, expected float32");
  }
  {
    Step s;
    HostTensor q(ScalarType::kFloat32, {2, 3, 4});
    expect_error([&] { s.run(q.view()); }, "query must be [tokens, 2, 4]");
  }
  {
    Step s;
    s.common.slot_mapping = {7, 8};
    expect_error([&] { s.run(); }, "slot_mapping[1] = 8 is outside the cache (4 blocks of 2)");
  }
  {
    Step s;
    s.common.block_table = {3, 9};
    expect_error([&] { s.run(); }, "block_table[0][1] = 9 is outside the cache");
  }
  {
    Step s;
    s.common.seq_lens = {1};
    s.common.block_table = {3, 1};
    expect_error([&] { s.run(); }, "request 0 has 2 new tokens but seq_len 1");
  }
  {
    Step s;
    s.common.seq_lens = {5};
    expect_error([&] { s.run(); }, "request 0 needs 3 blocks for 5 tokens");
  }
  {
    Step s;
    s.cache.block_size = 4;
    expect_error([&] { s.run(); }, "cache block size 4 differs from the metadata's block size 2");
  }
  {
    Step s;
    s.cache.layout = KvLayout::kHND;
    expect_error([&] { s.run(); }, "key cache must be HND [num_blocks, 1, 2, 4]");
  }
  {
    Step s;
    s.common.query_start_loc = {0};
    expect_error([&] { s.run(); }, "query_start_loc has 1 entries, expected num_reqs + 1 = 2");
  }
  {
    Step s;
    s.common.num_actual_tokens = 3;
    expect_error([&] { s.run(); }, "query_start_loc ends at 2 but num_actual_tokens is 3");
  }
  {
    Step s;
    s.layer.attn_type = AttentionType::kEncoderOnly;
    expect_error([&] { s.run(); }, "request 0 has seq_len 3 but 2 new tokens");
  }
  {
    Step s;
    expect_error(
        [&] {
          auto builder = s.backend->make_builder(KvCacheSpec{}, s.layer);
          s.backend->make_impl(s.layer)->forward(s.q.view(), TensorView{}, TensorView{}, s.cache,
                                                 builder->build(s.common), s.out.view());
        },
        "key/value are required for decoder layers");
  }
}

}  // namespace
}  // namespace attnkit
