// Per-phase composites end to end on the CPU (REFERENCE + CPU_FLASH): each step's decode
// rows reach the decode backend's builder and implementation only, its prefill rows the
// prefill backend's; swapping the two swaps what ran; outputs match a REFERENCE-only run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "attnkit/core/error.h"
#include "attnkit/model/model_loader.h"
#include "attnkit/runtime/attention_stack.h"
#include "attnkit/runtime/model_runner.h"
#include "attnkit/runtime/request.h"
#include "stack_rows.h"

namespace attnkit {
namespace {

using ::testing::Each;
using ::testing::ElementsAre;
using ::testing::Gt;
using ::testing::HasSubstr;
using ::testing::Le;

// What a spy saw: per build, the query length of every request; per forward, its rows.
struct SpyLog {
  std::vector<int> query_lens;
  long forward_rows = 0;
};

// A backend that behaves exactly like `inner` (a real one) under its own name and logs
// what its builder and implementation are given.
class SpyBackend final : public AttentionBackend {
 public:
  SpyBackend(std::string name, std::shared_ptr<const AttentionBackend> inner,
             std::shared_ptr<SpyLog> log)
      : name_(std::move(name)), inner_(std::move(inner)), log_(std::move(log)) {}

  std::string_view name() const override { return name_; }
  std::string_view description() const override { return "spy"; }
  const BackendCapabilities& capabilities() const override { return inner_->capabilities(); }
  std::unique_ptr<MetadataBuilder> make_builder(const KvCacheSpec& spec,
                                                const AttentionLayerParams& layer) const override {
    return std::make_unique<Builder>(inner_->make_builder(spec, layer), log_);
  }
  std::unique_ptr<AttentionImpl> make_impl(const AttentionLayerParams& layer) const override {
    return std::make_unique<Impl>(name_, inner_->make_impl(layer), log_);
  }

 private:
  struct Builder final : MetadataBuilder {
    Builder(std::unique_ptr<MetadataBuilder> b, std::shared_ptr<SpyLog> l)
        : inner(std::move(b)), log(std::move(l)) {}
    void reserve(const StepLimits& limits, void* workspace) override {
      inner->reserve(limits, workspace);
    }
    const AttentionMetadata& build(const CommonAttentionMetadata& common,
                                   const ExecutionContext& ctx) override {
      for (int i = 0; i < common.num_reqs; ++i) {
        log->query_lens.push_back(common.query_start_loc[static_cast<size_t>(i) + 1] -
                                  common.query_start_loc[static_cast<size_t>(i)]);
      }
      return inner->build(common, ctx);
    }
    std::unique_ptr<MetadataBuilder> inner;
    std::shared_ptr<SpyLog> log;
  };
  struct Impl final : AttentionImpl {
    Impl(std::string_view n, std::unique_ptr<AttentionImpl> i, std::shared_ptr<SpyLog> l)
        : name(n), inner(std::move(i)), log(std::move(l)) {}
    std::string_view backend_name() const override { return name; }
    void forward(const TensorView& q, const TensorView& k, const TensorView& v,
                 const KvCacheTensors& cache, const AttentionMetadata& metadata,
                 const TensorView& out, const ExecutionContext& ctx) override {
      EXPECT_EQ(q.size(0), metadata.common().num_actual_tokens);
      log->forward_rows += q.size(0);
      inner->forward(q, k, v, cache, metadata, out, ctx);
    }
    std::string name;
    std::unique_ptr<AttentionImpl> inner;
    std::shared_ptr<SpyLog> log;
  };

  std::string name_;
  std::shared_ptr<const AttentionBackend> inner_;
  std::shared_ptr<SpyLog> log_;
};

void register_spy(BackendRegistry& registry, const std::string& name, const std::string& inner,
                  std::shared_ptr<SpyLog> log) {
  std::shared_ptr<const AttentionBackend> real = registry.get(inner);
  registry.register_backend(
      name, [name, real, log] { return std::make_unique<SpyBackend>(name, real, log); });
}

RunReport run_model(const std::string& model_name, const std::string& config_json,
                    const BackendRegistry& registry) {
  const ModelDescription model = load_model(model_name);
  const Selector selector(parse_attention_config(config_json, registry), registry);
  RunnerOptions o;
  o.dtype = DType::kFloat32;
  o.max_layers_per_kind = 1;
  o.window_cap = 16;
  o.kv_cache_memory = size_t{64} << 20;
  o.scheduler.max_batch_tokens = 48;
  o.seed = 3;
  o.verify.enabled = true;
  o.verify.samples_per_layer_step = 0;
  ModelRunner runner(model, cpu_platform(), selector, o);
  return runner.run(make_workload(
      {.num_requests = 5, .min_prompt_len = 6, .max_prompt_len = 40, .output_len = 6, .seed = 3}));
}

TEST(PhaseRouting, RunnerSendsEachPhaseToItsBackendAndTheSwapSwapsIt) {
  BackendRegistry registry;
  auto flash_log = std::make_shared<SpyLog>(), ref_log = std::make_shared<SpyLog>();
  register_spy(registry, "SPY_FLASH", "CPU_FLASH", flash_log);
  register_spy(registry, "SPY_REF", "REFERENCE", ref_log);

  const RunReport r =
      run_model("gemma-3-1b-it", R"({"prefill_backend": "SPY_FLASH", "decode_backend": "SPY_REF"})",
                registry);
  ASSERT_TRUE(r.verify && r.verify->passed) << to_text(r);
  ASSERT_GE(r.groups.size(), 2u);
  for (const GroupRunReport& g : r.groups) {
    EXPECT_THAT(g.backends_planned, ElementsAre("prefill:SPY_FLASH|decode:SPY_REF"));
    EXPECT_THAT(g.prefill_backends_executed, ElementsAre("SPY_FLASH"));
    EXPECT_THAT(g.decode_backends_executed, ElementsAre("SPY_REF"));
  }
  // The decode spy saw decode requests only, the prefill spy prefill requests only, and
  // between them every row of every forward call.
  ASSERT_FALSE(ref_log->query_lens.empty());
  ASSERT_FALSE(flash_log->query_lens.empty());
  EXPECT_THAT(ref_log->query_lens, Each(Le(kDecodeQueryLen)));
  EXPECT_THAT(flash_log->query_lens, Each(Gt(kDecodeQueryLen)));
  const long layers = r.num_attention_layers;
  EXPECT_EQ(flash_log->forward_rows + ref_log->forward_rows, r.tokens * layers);

  // The swap: the same steps, each phase now on the other backend.
  *flash_log = {};
  *ref_log = {};
  const RunReport swapped =
      run_model("gemma-3-1b-it", R"({"prefill_backend": "SPY_REF", "decode_backend": "SPY_FLASH"})",
                registry);
  ASSERT_TRUE(swapped.verify && swapped.verify->passed) << to_text(swapped);
  for (const GroupRunReport& g : swapped.groups) {
    EXPECT_THAT(g.prefill_backends_executed, ElementsAre("SPY_REF"));
    EXPECT_THAT(g.decode_backends_executed, ElementsAre("SPY_FLASH"));
  }
  EXPECT_THAT(flash_log->query_lens, Each(Le(kDecodeQueryLen)));
  EXPECT_THAT(ref_log->query_lens, Each(Gt(kDecodeQueryLen)));
  EXPECT_EQ(swapped.tokens, r.tokens);
  EXPECT_EQ(swapped.decode_tokens, r.decode_tokens);

  // The text report names each phase's backend.
  EXPECT_THAT(to_text(swapped), HasSubstr("[prefill rows: SPY_REF; decode rows: SPY_FLASH]"));
  const nlohmann::json j = to_json(swapped);
  EXPECT_EQ(j["kv_cache_groups"][0]["backends_executed_by_phase"]["decode"][0], "SPY_FLASH");
}

TEST(PhaseRouting, PerKindPhasesRouteOnlyThatKind) {
  const RunReport r = run_model("gemma-3-1b-it",
                                R"({"backend": "CPU_FLASH",
          "backend_per_kind": {"sliding_window": {"decode_backend": "REFERENCE"}}})",
                                global_registry());
  ASSERT_TRUE(r.verify && r.verify->passed) << to_text(r);
  for (const GroupRunReport& g : r.groups) {
    if (g.kind == KvCacheKind::kSlidingWindow) {
      EXPECT_THAT(g.prefill_backends_executed, ElementsAre("CPU_FLASH"));
      EXPECT_THAT(g.decode_backends_executed, ElementsAre("REFERENCE"));
      EXPECT_EQ(g.chosen_by, "per_kind");
    } else {
      EXPECT_THAT(g.backends_executed, ElementsAre("CPU_FLASH"));
      EXPECT_THAT(g.decode_backends_executed, ElementsAre("CPU_FLASH"));
    }
  }
}

// --- AttentionStack: a caller's split-ordered batches ------------------------------------

using testing::output_rows;
using testing::random_rows;
using testing::Rows;

AttentionStackOptions stack_options(const std::string& config_json) {
  AttentionStackOptions o;
  o.dtype = DType::kFloat32;
  o.kv_cache_bytes = size_t{64} << 20;
  o.attention = parse_attention_config(config_json);
  return o;
}

TEST(PhaseRouting, StackCompositeMatchesReferenceOverPrefillMixedAndDecodeSteps) {
  const ModelDescription model = load_model("gemma-3-1b-it");
  AttentionStack ours(model, stack_options(R"({"prefill_backend": "REFERENCE",
                                               "decode_backend": "CPU_FLASH"})"));
  AttentionStack reference(model, stack_options(R"({"backend": "REFERENCE"})"));
  ASSERT_TRUE(ours.layer(0).selection->phases);
  EXPECT_EQ(ours.layer(0).selection->backend, "prefill:REFERENCE|decode:CPU_FLASH");
  // Decodes first in every batch (the composite's order), a window of 512 crossed.
  const std::vector<std::vector<StepRequest>> steps = {
      {{1, 0, 530}, {2, 0, 37}},
      {{1, 530, 1}, {2, 37, 1}, {3, 0, 300}},
      {{1, 531, 1}, {2, 38, 1}, {3, 300, 5}},
      {{1, 532, 1}, {2, 39, 1}, {3, 305, 1}},
  };
  std::mt19937 rng(77);
  for (const std::vector<StepRequest>& step : steps) {
    for (const StepRequest& r : step) {
      if (!ours.has_request(r.id)) {
        ours.add_request(r.id);
        reference.add_request(r.id);
      }
    }
    ours.plan_step(step);
    reference.plan_step(step);
    int64_t tokens = 0;
    for (const StepRequest& r : step) tokens += r.num_new_tokens;
    for (int index : {0, 5}) {
      const AttentionLayerParams& p = ours.layer(index).params;
      const Rows q = random_rows(tokens, p.num_heads, p.head_size, rng);
      const Rows k = random_rows(tokens, p.num_kv_heads, p.head_size, rng);
      const Rows v = random_rows(tokens, p.num_kv_heads, p.head_size_v, rng);
      Rows a = output_rows(tokens, p.num_heads, p.head_size_v);
      Rows b = output_rows(tokens, p.num_heads, p.head_size_v);
      ours.forward(index, q.view, k.view, v.view, a.view);
      reference.forward(index, q.view, k.view, v.view, b.view);
      float worst = 0.0f;
      for (size_t i = 0; i < a.data.size(); ++i) {
        const float d = std::fabs(a.data[i] - b.data[i]);
        worst = std::isnan(d) ? INFINITY : std::max(worst, d);
      }
      EXPECT_LE(worst, 2e-5f) << "layer " << index << ", step of " << tokens << " tokens";
    }
  }
}

TEST(PhaseRouting, StackRefusesADecodeAfterAPrefillNamingIt) {
  AttentionStack stack(load_model("llama-3.1-8b-instruct"),
                       stack_options(R"({"prefill_backend": "REFERENCE",
                                         "decode_backend": "CPU_FLASH"})"));
  stack.add_request(1);
  stack.add_request(2);
  const std::vector<StepRequest> first = {{1, 0, 4}};
  stack.plan_step(first);
  const std::vector<StepRequest> mixed = {{2, 0, 6}, {1, 4, 1}};
  try {
    stack.plan_step(mixed);
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("batch request 1 is a decode (query length 1) after prefill "
                                    "request 0 (query length 6)"));
  }
}

}  // namespace
}  // namespace attnkit
