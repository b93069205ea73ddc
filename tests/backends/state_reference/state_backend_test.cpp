// The state backends through the protocol a runtime uses: selection, the KV-cache plan
// (one state block per request in the shared pool), the block manager, per-step common
// metadata, the builder and forward(). Every layer type: a sequence fed in one prefill, in
// chunks of several sizes and token by token gives the same outputs (bit for bit in
// float32, since the state is float32 between calls), and those outputs match the layer's
// dense form (backend/state_ops.h) on fresh random inputs.

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "attnkit/backend/state_params.h"
#include "attnkit/core/numeric.h"
#include "attnkit/core/platform.h"
#include "attnkit/kv_cache/common_metadata_builder.h"
#include "attnkit/kv_cache/kv_cache_manager.h"
#include "attnkit/kv_cache/kv_cache_storage.h"
#include "attnkit/kv_cache/spec_factory.h"
#include "attnkit/registry/registry.h"
#include "attnkit/runtime/qkv_generator.h"
#include "attnkit/selector/priority.h"
#include "backend/state_ops.h"

namespace attnkit {
namespace {

struct StateCase {
  const char* backend;
  StateLayerDims dims;
};

StateLayerDims dims_of(StateLayerType type) {
  StateLayerDims d;
  d.type = type;
  switch (type) {
    case StateLayerType::kMamba1:
      d.inner_size = 16, d.state_size = 4, d.dt_rank = 3, d.conv_kernel = 4;
      break;
    case StateLayerType::kMamba2:
      d.num_heads = 4, d.head_dim = 8, d.n_groups = 2, d.state_size = 6, d.conv_kernel = 4;
      break;
    case StateLayerType::kGatedDeltaNet:
      d.num_k_heads = 2, d.head_k_dim = 8, d.num_heads = 4, d.head_dim = 6, d.conv_kernel = 4;
      break;
    case StateLayerType::kKimiDeltaAttention:
      d.num_k_heads = 3, d.head_k_dim = 8, d.num_heads = 3, d.head_dim = 8, d.conv_kernel = 3;
      break;
    case StateLayerType::kShortConv:
      d.inner_size = 24, d.conv_kernel = 3;
      break;
    case StateLayerType::kLinearAttention:
      d.num_heads = 3, d.head_dim = 8;
      break;
    case StateLayerType::kRgLru:
      d.inner_size = 16, d.num_heads = 4, d.conv_kernel = 4;
      break;
  }
  return d;
}

std::vector<StateCase> all_cases() {
  return {{"MAMBA1", dims_of(StateLayerType::kMamba1)},
          {"MAMBA2", dims_of(StateLayerType::kMamba2)},
          {"GDN_ATTN", dims_of(StateLayerType::kGatedDeltaNet)},
          {"KDA_ATTN", dims_of(StateLayerType::kKimiDeltaAttention)},
          {"SHORT_CONV", dims_of(StateLayerType::kShortConv)},
          {"LINEAR", dims_of(StateLayerType::kLinearAttention)},
          {"RG_LRU", dims_of(StateLayerType::kRgLru)}};
}

SelectorConfig state_config(const StateLayerDims& dims, DType dtype) {
  SelectorConfig c;
  c.state = dims;
  c.dtype = dtype;
  c.head_size = c.head_size_v = 0;
  return c;
}

// Two requests of lengths 13 and 9 fed step by step in `chunks` (per request, the new
// tokens of each step; a request with no entry left sits out), through one state layer.
// Returns each request's output rows, [len][output_width()] as floats.
class StateHarness {
 public:
  StateHarness(const StateCase& c, DType dtype, uint64_t seed)
      : dims_(c.dims), dtype_(dtype), registry_() {
    backend_ = registry_.get(c.backend);
    const KvCacheSpec spec = spec_for_layer(state_config(dims_, dtype));
    const LayerKvInput input{0, spec, backend_.get()};
    config_ = plan_kv_cache(std::span<const LayerKvInput>(&input, 1));
    layer_.layer_index = 0;
    layer_.kind = KvCacheKind::kMamba;
    layer_.dtype = dtype;
    layer_.state = dims_;
    layer_.state_params = QkvGenerator(seed, dtype).state_params(0, dims_);
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (int len : kLens) {
      std::vector<float> rows(static_cast<size_t>(len * dims_.input_width()));
      for (float& v : rows) v = round_trip(scalar_type_of(dtype), u(rng));
      inputs_.push_back(std::move(rows));
    }
  }

  static constexpr int kLens[2] = {13, 9};

  std::vector<std::vector<float>> run(const std::vector<std::vector<int>>& chunks) const {
    KvCacheManager kv(config_, 8);
    KvCacheStorage storage(config_, 8);
    const KvCacheGroup& group = config_.groups.at(0);
    auto builder = backend_->make_builder(group.spec, layer_);
    auto impl = backend_->make_impl(layer_);
    const int in_w = dims_.input_width(), out_w = dims_.output_width();
    const ScalarType type = scalar_type_of(dtype_);
    std::vector<std::vector<float>> out(2);
    std::vector<int> done(2, 0);
    std::vector<size_t> next(2, 0);
    for (int r = 0; r < 2; ++r) kv.add_request(r);
    while (next[0] < chunks[0].size() || next[1] < chunks[1].size()) {
      std::vector<StepRequest> step;
      std::vector<int> who;
      for (int r = 0; r < 2; ++r) {
        if (next[static_cast<size_t>(r)] >= chunks[static_cast<size_t>(r)].size()) continue;
        const int n = chunks[static_cast<size_t>(r)][next[static_cast<size_t>(r)]];
        EXPECT_TRUE(kv.allocate_slots(r, done[static_cast<size_t>(r)], n).ok);
        step.push_back({r, done[static_cast<size_t>(r)], n, false});
        who.push_back(r);
      }
      const std::vector<CommonAttentionMetadata> common = build_step_metadata(kv, step);
      int rows = 0;
      for (const StepRequest& s : step) rows += s.num_new_tokens;
      HostTensor in(type, {rows, in_w});
      HostTensor o(type, {rows, out_w});
      int row = 0;
      for (const StepRequest& s : step) {
        for (int t = 0; t < s.num_new_tokens; ++t, ++row) {
          for (int c = 0; c < in_w; ++c) {
            const float v = inputs_[static_cast<size_t>(s.id)]
                                   [static_cast<size_t>((s.num_computed_tokens + t) * in_w + c)];
            store_from_float(in.data(), type, static_cast<int64_t>(row) * in_w + c, v);
          }
        }
      }
      const AttentionMetadata& plan = builder->build(common[0]);
      impl->forward(in.view(), {}, {}, storage.tensors(0), plan, o.view());
      row = 0;
      for (const StepRequest& s : step) {
        for (int t = 0; t < s.num_new_tokens; ++t, ++row) {
          for (int c = 0; c < out_w; ++c) {
            out[static_cast<size_t>(s.id)].push_back(
                load_as_float(o.data(), type, static_cast<int64_t>(row) * out_w + c));
          }
        }
        done[static_cast<size_t>(s.id)] += s.num_new_tokens;
        ++next[static_cast<size_t>(s.id)];
      }
    }
    EXPECT_EQ(kv.check_invariants(), "");
    return out;
  }

  // The dense form over each request's whole sequence.
  std::vector<std::vector<float>> dense() const {
    std::vector<std::vector<float>> out;
    for (size_t r = 0; r < 2; ++r) {
      std::vector<float> o(static_cast<size_t>(kLens[r] * dims_.output_width()));
      run_state_layer_dense(dims_, layer_.state_params, kLens[r], inputs_[r].data(), o.data());
      out.push_back(std::move(o));
    }
    return out;
  }

  const KvCacheConfig& config() const { return config_; }

 private:
  StateLayerDims dims_;
  DType dtype_;
  BackendRegistry registry_;
  std::shared_ptr<const AttentionBackend> backend_;
  KvCacheConfig config_;
  AttentionLayerParams layer_;
  std::vector<std::vector<float>> inputs_;
};

// max |a - b| / max |b| over one request's rows.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(a[i]) - b[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

class StateBackendTest : public ::testing::TestWithParam<StateCase> {};

TEST_P(StateBackendTest, OnePrefillChunksAndTokensGiveTheSameOutputsAsTheDenseForm) {
  const StateHarness h(GetParam(), DType::kFloat32, 7);
  const auto whole = h.run({{13}, {9}});
  const auto chunked = h.run({{1, 3, 7, 2}, {4, 5}});
  const auto tokens = h.run({std::vector<int>(13, 1), std::vector<int>(9, 1)});
  const auto dense = h.dense();
  for (size_t r = 0; r < 2; ++r) {
    ASSERT_EQ(whole[r].size(), dense[r].size());
    // The state is float32 between calls and each token's result depends only on it, so
    // how the sequence is split changes nothing.
    EXPECT_EQ(whole[r], chunked[r]) << "request " << r;
    EXPECT_EQ(whole[r], tokens[r]) << "request " << r;
    // Recurrent (float32 state) against dense (double, no state): 1e-4 of the row scale.
    EXPECT_LT(relative_error(whole[r], dense[r]), 1e-4) << "request " << r;
    EXPECT_TRUE(std::any_of(whole[r].begin(), whole[r].end(), [](float v) { return v != 0; }));
  }
}

TEST_P(StateBackendTest, Bf16RowsMatchTheDenseFormWithinBf16Rounding) {
  const StateHarness h(GetParam(), DType::kBFloat16, 11);
  const auto chunked = h.run({{5, 8}, {2, 2, 5}});
  const auto dense = h.dense();
  // Outputs are rounded once to bfloat16 (8 bits of mantissa): 2^-8 of the row scale.
  for (size_t r = 0; r < 2; ++r) EXPECT_LT(relative_error(chunked[r], dense[r]), 1.0 / 256);
}

TEST_P(StateBackendTest, OneStateBlockPerRequestPaddedToThePage) {
  const StateHarness h(GetParam(), DType::kFloat32, 3);
  const KvCacheConfig& c = h.config();
  ASSERT_EQ(c.groups.size(), 1u);
  EXPECT_EQ(c.groups[0].spec.kind, KvCacheKind::kMamba);
  EXPECT_GE(c.page_size_bytes, GetParam().dims.bytes());
  EXPECT_EQ(c.page_size_bytes % 16, 0u);
  KvCacheManager kv(c, 4);
  kv.add_request(1);
  ASSERT_TRUE(kv.allocate_slots(1, 0, 100).ok);
  ASSERT_TRUE(kv.allocate_slots(1, 100, 1).ok);
  EXPECT_EQ(kv.block_table(1, 0).size(), 1u) << "a state group holds one block per request";
  EXPECT_EQ(kv.min_blocks_alone(5000), 1);
}

INSTANTIATE_TEST_SUITE_P(EveryLayerType, StateBackendTest, ::testing::ValuesIn(all_cases()),
                         [](const auto& param_info) {
                           return std::string(param_info.param.backend);
                         });

TEST(StateBackends, EachDeclaresExactlyItsLayerType) {
  const BackendRegistry registry;
  const Platform cpu = cpu_platform();
  for (const StateCase& c : all_cases()) {
    for (const StateCase& other : all_cases()) {
      const std::vector<std::string> reasons =
          registry.get(c.backend)->validate(state_config(other.dims, DType::kBFloat16), cpu);
      if (c.dims.type == other.dims.type) {
        EXPECT_TRUE(reasons.empty()) << c.backend;
      } else {
        ASSERT_EQ(reasons.size(), 1u) << c.backend << " for " << to_string(other.dims.type);
        EXPECT_EQ(reasons[0], fmt::format("state layer type {} not supported (supported: {})",
                                          to_string(other.dims.type), to_string(c.dims.type)));
      }
    }
  }
}

TEST(StateBackends, AttentionBackendsRefuseStateLayersAndTheReverse) {
  const BackendRegistry registry;
  const Platform cpu = cpu_platform();
  const SelectorConfig state = state_config(dims_of(StateLayerType::kMamba2), DType::kBFloat16);
  EXPECT_EQ(registry.get("CPU_FLASH")->validate(state, cpu),
            std::vector<std::string>{"serves attention layers, not state layers (mamba2)"});
  EXPECT_EQ(registry.get("REFERENCE")->validate(state, cpu),
            std::vector<std::string>{"serves attention layers, not state layers (mamba2)"});
  SelectorConfig attention;
  attention.head_size = attention.head_size_v = 128;
  EXPECT_EQ(
      registry.get("MAMBA2")->validate(attention, cpu),
      std::vector<std::string>{"serves only state layers (mamba2), and this layer is attention"});
  EXPECT_EQ(registry.get("GDN_ATTN")
                ->validate(state_config(dims_of(StateLayerType::kGatedDeltaNet), DType::kBFloat16),
                           parse_platform("cuda:9.0")),
            std::vector<std::string>{"runs on cpu, not on cuda:9.0"});
}

TEST(StateBackends, ForwardWithoutParametersNamesTheSetter) {
  const BackendRegistry registry;
  AttentionLayerParams layer;
  layer.layer_index = 3;
  layer.dtype = DType::kFloat32;
  layer.state = dims_of(StateLayerType::kLinearAttention);
  const KvCacheSpec spec = state_spec(*layer.state);
  const auto backend = registry.get("LINEAR");
  const LayerKvInput input{3, spec, backend.get()};
  const KvCacheConfig config = plan_kv_cache(std::span<const LayerKvInput>(&input, 1));
  KvCacheManager kv(config, 4);
  KvCacheStorage storage(config, 4);
  kv.add_request(0);
  ASSERT_TRUE(kv.allocate_slots(0, 0, 2).ok);
  const std::vector<StepRequest> step = {{0, 0, 2, false}};
  const auto common = build_step_metadata(kv, step);
  auto builder = backend->make_builder(spec, layer);
  auto impl = backend->make_impl(layer);
  HostTensor in(ScalarType::kFloat32, {2, layer.state->input_width()});
  HostTensor out(ScalarType::kFloat32, {2, layer.state->output_width()});
  try {
    impl->forward(in.view(), {}, {}, storage.tensors(3), builder->build(common[0]), out.view());
    FAIL() << "forward ran without parameters";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("LINEAR (layer 3): the layer has no parameters"),
              std::string::npos)
        << e.what();
  }
  layer.state_params.assign(2, 0.5f);  // 3 heads need 3 slopes
  try {
    backend->make_impl(layer);
    FAIL() << "a wrong parameter count was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("its parameters hold 2 floats, but linear_attention 3x8 "
                                         "heads needs 3"),
              std::string::npos)
        << e.what();
  }
}

TEST(StateBackends, ForwardRefusesRowsOfTheWrongWidth) {
  const BackendRegistry registry;
  AttentionLayerParams layer;
  layer.dtype = DType::kFloat32;
  layer.state = dims_of(StateLayerType::kShortConv);
  layer.state_params = QkvGenerator(1, DType::kFloat32).state_params(0, *layer.state);
  const KvCacheSpec spec = state_spec(*layer.state);
  const auto backend = registry.get("SHORT_CONV");
  const LayerKvInput input{0, spec, backend.get()};
  const KvCacheConfig config = plan_kv_cache(std::span<const LayerKvInput>(&input, 1));
  KvCacheManager kv(config, 4);
  KvCacheStorage storage(config, 4);
  kv.add_request(0);
  ASSERT_TRUE(kv.allocate_slots(0, 0, 1).ok);
  const auto common = build_step_metadata(kv, std::vector<StepRequest>{{0, 0, 1, false}});
  auto builder = backend->make_builder(spec, layer);
  auto impl = backend->make_impl(layer);
  HostTensor in(ScalarType::kFloat32, {1, 71});  // 3 x 24 = 72 expected
  HostTensor out(ScalarType::kFloat32, {1, 24});
  try {
    impl->forward(in.view(), {}, {}, storage.tensors(0), builder->build(common[0]), out.view());
    FAIL() << "a row of 71 inputs was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input must be float32[1, 72]"), std::string::npos)
        << e.what();
  }
}

TEST(StatePriority, StateLayersWalkTheStateBackends) {
  const BackendRegistry registry;
  const SelectorConfig c = state_config(dims_of(StateLayerType::kMamba1), DType::kBFloat16);
  EXPECT_EQ(priority_list(registry, cpu_platform(), c), builtin_state_priority());
}

}  // namespace
}  // namespace attnkit
