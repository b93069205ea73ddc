// Plugin backends take part in tuned choices like built-in ones: the example plugin and a
// deliberately slow backend (REFERENCE plus a fixed delay in every forward) are both
// timed on the layer's shapes, and the plugin, measured faster, wins.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "attnkit/plugin/plugin_loader.h"
#include "attnkit/runtime/backend_timer.h"
#include "attnkit/selector/selector.h"

namespace attnkit {
namespace {

const std::string kExample = ATTNKIT_EXAMPLE_PLUGIN_PATH;

// REFERENCE, 20 ms slower per forward().
class DelayedBackend final : public AttentionBackend {
 public:
  explicit DelayedBackend(std::shared_ptr<const AttentionBackend> inner)
      : inner_(std::move(inner)) {}
  std::string_view name() const override { return "DELAYED_REF"; }
  std::string_view description() const override { return "REFERENCE plus 20 ms per forward"; }
  const BackendCapabilities& capabilities() const override { return inner_->capabilities(); }
  std::unique_ptr<MetadataBuilder> make_builder(const KvCacheSpec& spec,
                                                const AttentionLayerParams& layer) const override {
    return inner_->make_builder(spec, layer);
  }
  std::unique_ptr<AttentionImpl> make_impl(const AttentionLayerParams& layer) const override {
    return std::make_unique<Impl>(inner_->make_impl(layer));
  }

 private:
  struct Impl final : AttentionImpl {
    explicit Impl(std::unique_ptr<AttentionImpl> i) : inner(std::move(i)) {}
    std::string_view backend_name() const override { return "DELAYED_REF"; }
    void forward(const TensorView& q, const TensorView& k, const TensorView& v,
                 const KvCacheTensors& cache, const AttentionMetadata& metadata,
                 const TensorView& out, const ExecutionContext& ctx) override {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      inner->forward(q, k, v, cache, metadata, out, ctx);
    }
    std::unique_ptr<AttentionImpl> inner;
  };
  std::shared_ptr<const AttentionBackend> inner_;
};

TEST(PluginTuning, APluginMeasuredFasterWinsTheTunedChoice) {
  BackendRegistry builtins;
  BackendRegistry registry(BackendRegistry::Contents::kEmpty);
  std::shared_ptr<const AttentionBackend> reference = builtins.get("REFERENCE");
  registry.register_backend("DELAYED_REF",
                            [reference] { return std::make_unique<DelayedBackend>(reference); });
  load_plugin(kExample, registry);

  const std::string path = (std::filesystem::temp_directory_path() /
                            ("attnkit_plugin_tuning_" + std::to_string(::getpid()) + ".json"))
                               .string();
  std::filesystem::remove(path);
  TimerOptions timer;
  timer.warmup = 0;
  timer.repeats = 3;
  timer.registry = &registry;
  const Selector selector(
      parse_attention_config(R"({"backend": "tuned"})", registry), registry,
      make_measuring_tuning(path, timer, {{Phase::kDecode, 2, 1, 32}, {Phase::kPrefill, 1, 8, 8}}));
  SelectorConfig layer;
  layer.head_size = layer.head_size_v = 64;
  layer.num_heads = 4;
  layer.num_kv_heads = 2;
  layer.dtype = DType::kFloat32;
  layer.kv_cache_dtype = KvCacheDType::kFloat32;
  const auto r = selector.select(layer, cpu_platform());
  ASSERT_TRUE(r->tuning);
  ASSERT_EQ(r->tuning->timings.size(), 2u) << r->tuning->why;
  EXPECT_EQ(r->backend, "EXAMPLE_CPU");
  EXPECT_EQ(r->chosen_by, ChosenBy::kTuned);
  EXPECT_EQ(r->tuning->timings[1].backend, "DELAYED_REF");
  // Two buckets of at least 20 ms each for the delayed backend.
  EXPECT_GE(r->tuning->timings[1].total_us, 40000.0);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace attnkit
