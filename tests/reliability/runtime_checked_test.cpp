// The runtime's checked mode: a forward call whose output holds NaN for one request fails
// the run with an Error naming that request by id (and only it); with checked mode off the
// run completes. The NaN comes from a CUSTOM backend that poisons the query of the last
// request of each batch before handing the call to REFERENCE.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <memory>
#include <string>

#include "attnkit/core/error.h"
#include "attnkit/model/model_loader.h"
#include "attnkit/registry/registry.h"
#include "attnkit/runtime/model_runner.h"
#include "attnkit/selector/attention_config.h"
#include "attnkit/selector/selector.h"
#include "backends/reference/reference_backend.h"

namespace attnkit {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class PoisonImpl final : public AttentionImpl {
 public:
  explicit PoisonImpl(std::unique_ptr<AttentionImpl> inner) : inner_(std::move(inner)) {}
  std::string_view backend_name() const override { return "CUSTOM"; }
  void forward(const TensorView& query, const TensorView& key, const TensorView& value,
               const KvCacheTensors& cache, const AttentionMetadata& metadata,
               const TensorView& output, const ExecutionContext& /*ctx*/) override {
    const CommonAttentionMetadata& c = metadata.common();
    HostTensor copy(query.dtype, std::span<const int64_t>(query.shape.data(), 3));
    std::memcpy(copy.data(), query.data, copy.nbytes());
    const int last = c.num_reqs - 1;
    if (last >= 0 && c.query_start_loc[static_cast<size_t>(last) + 1] >
                         c.query_start_loc[static_cast<size_t>(last)]) {
      const int64_t row = c.query_start_loc[static_cast<size_t>(last)];
      copy.data_as<float>()[row * query.stride(0)] = std::numeric_limits<float>::quiet_NaN();
    }
    inner_->forward(copy.view(), key, value, cache, metadata, output);
  }

 private:
  std::unique_ptr<AttentionImpl> inner_;
};

class PoisonBackend final : public AttentionBackend {
 public:
  // `inner_checked`: the checked mode of the REFERENCE implementation underneath.
  explicit PoisonBackend(bool inner_checked) : inner_checked_(inner_checked) {}
  std::string_view name() const override { return "CUSTOM"; }
  std::string_view description() const override { return "REFERENCE with a poisoned query"; }
  const BackendCapabilities& capabilities() const override { return reference_->capabilities(); }
  std::unique_ptr<MetadataBuilder> make_builder(const KvCacheSpec& spec,
                                                const AttentionLayerParams& layer) const override {
    return reference_->make_builder(spec, layer);
  }
  std::unique_ptr<AttentionImpl> make_impl(const AttentionLayerParams& layer) const override {
    AttentionLayerParams inner = layer;
    inner.checked = inner_checked_;
    return std::make_unique<PoisonImpl>(reference_->make_impl(inner));
  }

 private:
  bool inner_checked_;
  std::unique_ptr<AttentionBackend> reference_ = make_reference_backend();
};

// Two requests of 8 prompt tokens, both in the first step; returns the Error's message or "".
std::string run_poisoned(bool checked, bool inner_checked) {
  BackendRegistry registry;
  registry.register_backend("CUSTOM",
                            [=] { return std::make_unique<PoisonBackend>(inner_checked); });
  const Selector selector(parse_attention_config(R"({"backend": "CUSTOM"})", registry), registry);
  RunnerOptions o;
  o.dtype = DType::kFloat32;
  o.max_layers_per_kind = 1;
  o.window_cap = 16;
  o.kv_cache_memory = size_t{16} << 20;
  o.scheduler.max_batch_tokens = 64;
  o.checked = checked;
  ModelRunner runner(load_model(std::string(ATTNKIT_MODELS_DIR) + "/gemma-3-1b-it.json"),
                     cpu_platform(), selector, o);
  try {
    runner.run(make_workload(
        {.num_requests = 2, .min_prompt_len = 8, .max_prompt_len = 8, .output_len = 2}));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RuntimeCheckedMode, NamesTheRequestWhoseOutputIsNotFinite) {
  // The backend underneath reports batch indices; the runtime names request ids.
  for (const bool inner_checked : {true, false}) {
    SCOPED_TRACE(inner_checked ? "backend checked" : "backend unchecked");
    const std::string message = run_poisoned(/*checked=*/true, inner_checked);
    EXPECT_THAT(message, HasSubstr("step 0, layer 0 (CUSTOM): NaN/inf for 1 of 2 requests of the "
                                   "step: request id 1 "));
    EXPECT_THAT(message, HasSubstr("request id 1 output (1 rows, first at position 0 head 0 dim "
                                   "0)"));
    EXPECT_THAT(message, Not(HasSubstr("request id 0")));
  }
}

TEST(RuntimeCheckedMode, OffLetsTheRunFinish) {
  EXPECT_EQ(run_poisoned(/*checked=*/false, /*inner_checked=*/false), "");
}

}  // namespace
}  // namespace attnkit
