// The adapter: a plugin backend behaves like any AttentionBackend, turns every error status
// into attnkit::Error (never a crash), destroys what it creates, and keeps its library
// loaded exactly as long as something made from it lives.
#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>

#include "attnkit/core/tensor.h"
#include "attnkit/plugin/plugin_loader.h"
#include "plugin/plugin_test_util.h"

namespace attnkit {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::plugin_error_of;

const std::string kOk = ATTNKIT_PLUGIN_FIXTURE_OK;

// Builders and implementations of the fixture library alive right now.
int fixture_live_objects() {
  void* handle = dlopen(kOk.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return -1;
  auto fn = reinterpret_cast<int (*)()>(dlsym(handle, "fixture_live_objects"));
  const int live = fn != nullptr ? fn() : -2;
  dlclose(handle);
  return live;
}

// One decode token of the fixture's layer (4 heads, 2 KV heads, head size 64, fp32) over
// a one-block cache: inputs that pass the host's forward checks, so a forward reaches the
// plugin.
struct OneTokenStep {
  OneTokenStep() {
    common.num_reqs = 1;
    common.num_actual_tokens = 1;
    common.query_start_loc = {0, 1};
    common.seq_lens = {1};
    common.block_table = {0};
    common.max_blocks_per_req = 1;
    common.block_size = 16;
    common.slot_mapping = {0};
    common.max_query_len = common.max_seq_len = 1;
  }
  KvCacheTensors cache() const { return {kc.view(), vc.view(), KvLayout::kNHD, 16}; }

  CommonAttentionMetadata common;
  HostTensor q{ScalarType::kFloat32, {1, 4, 64}}, out{ScalarType::kFloat32, {1, 4, 64}};
  HostTensor k{ScalarType::kFloat32, {1, 2, 64}}, v{ScalarType::kFloat32, {1, 2, 64}};
  HostTensor kc{ScalarType::kFloat32, {1, 16, 2, 64}}, vc{ScalarType::kFloat32, {1, 16, 2, 64}};
};

class PluginAdapter : public ::testing::Test {
 protected:
  void SetUp() override {
    registry_ = std::make_unique<BackendRegistry>(BackendRegistry::Contents::kEmpty);
    load_plugin(kOk, *registry_);
    backend_ = registry_->get("FIXTURE");
    layer_.num_heads = 4;
    layer_.num_kv_heads = 2;
    layer_.head_size = layer_.head_size_v = 64;
    layer_.dtype = DType::kFloat32;
    spec_.num_kv_heads = 2;
    spec_.head_size = spec_.head_size_v = 64;
    spec_.dtype = ScalarType::kFloat32;
  }

  std::unique_ptr<BackendRegistry> registry_;
  std::shared_ptr<const AttentionBackend> backend_;
  AttentionLayerParams layer_;
  KvCacheSpec spec_;
};

TEST_F(PluginAdapter, CapabilitiesArriveAsDeclared) {
  const BackendCapabilities& caps = backend_->capabilities();
  EXPECT_EQ(caps.platform, PlatformKind::kCpu);
  EXPECT_THAT(caps.dtypes, ElementsAre(DType::kFloat32, DType::kBFloat16));
  EXPECT_THAT(caps.head_sizes.exact, ElementsAre(64, 80, 96, 128));
  EXPECT_EQ(caps.preferred_block_size, 32);
  EXPECT_THAT(caps.attention_types, ElementsAre(AttentionType::kDecoder));
  EXPECT_TRUE(caps.sliding_window);
  EXPECT_FALSE(caps.sinks);
  EXPECT_FALSE(caps.required_layout.has_value());
  EXPECT_EQ(backend_->kv_layout(), KvLayout::kNHD);
  EXPECT_FALSE(backend_->binary_reason(cpu_platform()).has_value());
}

TEST_F(PluginAdapter, ValidateCombinesCapabilitiesAndThePluginsCheck) {
  SelectorConfig config;
  config.dtype = DType::kBFloat16;
  config.head_size = config.head_size_v = 128;
  EXPECT_TRUE(backend_->validate(config, cpu_platform()).empty());

  config.head_size = config.head_size_v = 96;  // allowed by the list, refused by the hook
  EXPECT_THAT(backend_->validate(config, cpu_platform()),
              ElementsAre("head_size 96 is rejected by the fixture's combination hook"));

  config.head_size = config.head_size_v = 100;
  EXPECT_THAT(backend_->validate(config, cpu_platform()),
              ElementsAre("head_size 100 not supported (supported: 64, 80, 96, 128)"));

  config.head_size = config.head_size_v = 80;  // the hook itself fails: a reason, no crash
  EXPECT_THAT(backend_->validate(config, cpu_platform()),
              ElementsAre("plugin combination check failed: internal error: check exploded"));

  config.head_size = config.head_size_v = 64;
  config.dtype = DType::kFloat16;
  EXPECT_THAT(backend_->validate(config, parse_platform("cuda:9.0")),
              ElementsAre(HasSubstr("runs on cpu, not on cuda:9.0"),
                          "dtype float16 not supported (supported: float32, bfloat16)"));
}

TEST_F(PluginAdapter, FailingCreateCallsBecomeErrorsNamingBackendAndCall) {
  spec_.block_size = 7;
  Error e = plugin_error_of([&] { backend_->make_builder(spec_, layer_); });
  EXPECT_EQ(e.code(), ErrorCode::kPluginError);
  EXPECT_THAT(e.what(), HasSubstr("plugin backend FIXTURE (" + kOk +
                                  "): builder_create: "
                                  "unsupported: builder_create refuses block size 7"));

  layer_.num_heads = 0;
  e = plugin_error_of([&] { backend_->make_impl(layer_); });
  EXPECT_THAT(e.what(),
              HasSubstr("impl_create: invalid argument: impl_create refuses num_heads 0"));
  EXPECT_EQ(fixture_live_objects(), 0);
}

TEST_F(PluginAdapter, ErrorStatusFromForwardIsReportedOnEveryCallAndRunContinues) {
  auto builder = backend_->make_builder(spec_, layer_);
  auto impl = backend_->make_impl(layer_);
  EXPECT_EQ(impl->backend_name(), "FIXTURE");
  EXPECT_EQ(fixture_live_objects(), 2);

  const OneTokenStep s;

  // Two steps: each forward fails inside the plugin; each failure is an Error and the
  // next step still runs.
  const std::regex call_number("forward call ([0-9]+) rejected");
  int previous = 0;
  for (int step = 0; step < 2; ++step) {
    const AttentionMetadata& plan = builder->build(s.common);
    EXPECT_EQ(&plan.common(), &s.common);
    const Error e = plugin_error_of(
        [&] { impl->forward(s.q.view(), s.k.view(), s.v.view(), s.cache(), plan, s.out.view()); });
    EXPECT_EQ(e.code(), ErrorCode::kPluginError);
    const std::string what = e.what();
    EXPECT_THAT(what, HasSubstr("plugin backend FIXTURE (" + kOk +
                                "): impl_forward: internal "
                                "error: FIXTURE computes nothing"));
    std::smatch match;
    ASSERT_TRUE(std::regex_search(what, match, call_number)) << what;
    if (step > 0) {
      EXPECT_EQ(std::stoi(match[1]), previous + 1);
    }
    previous = std::stoi(match[1]);
  }
  builder.reset();
  impl.reset();
  EXPECT_EQ(fixture_live_objects(), 0);
}

TEST_F(PluginAdapter, ForwardRejectsAPlanFromAnotherBackend) {
  class ForeignPlan : public AttentionMetadata {
   public:
    const CommonAttentionMetadata& common() const override { return common_; }
    CommonAttentionMetadata common_;
  } foreign;
  auto impl = backend_->make_impl(layer_);
  HostTensor q(ScalarType::kFloat32, {1, 4, 64});
  const Error e = plugin_error_of(
      [&] { impl->forward(q.view(), {}, {}, KvCacheTensors{}, foreign, q.view()); });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.what(), HasSubstr("the metadata was not built by this backend's builder"));
}

// The host runs the built-in backends' forward checks before impl_forward: a bad input is an
// Error naming the value, and the plugin is never called with it.
TEST_F(PluginAdapter, BadInputIsRefusedBeforeThePluginRuns) {
  auto builder = backend_->make_builder(spec_, layer_);
  auto impl = backend_->make_impl(layer_);
  OneTokenStep s;
  // The fixture numbers the forward calls that reach it in its error message.
  auto reaching_call = [&](const TensorView& q) {
    const Error e = plugin_error_of([&] {
      impl->forward(q, s.k.view(), s.v.view(), s.cache(), builder->build(s.common), s.out.view());
    });
    EXPECT_EQ(e.code(), ErrorCode::kPluginError) << e.what();
    std::smatch match;
    const std::string what = e.what();
    return std::regex_search(what, match, std::regex("forward call ([0-9]+) rejected"))
               ? std::stoi(match[1])
               : -1;
  };
  const int first = reaching_call(s.q.view());
  ASSERT_GT(first, 0);

  s.common.slot_mapping = {16};  // the cache has one block of 16 slots
  Error e = plugin_error_of([&] {
    impl->forward(s.q.view(), s.k.view(), s.v.view(), s.cache(), builder->build(s.common),
                  s.out.view());
  });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.what(), HasSubstr("FIXTURE: slot_mapping[0] = 16 is outside the cache"));
  s.common.slot_mapping = {0};

  HostTensor three_heads(ScalarType::kFloat32, {1, 3, 64});
  e = plugin_error_of([&] {
    impl->forward(three_heads.view(), s.k.view(), s.v.view(), s.cache(), builder->build(s.common),
                  s.out.view());
  });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.what(), HasSubstr("FIXTURE: query must be [tokens, 4, 64]"));

  e = plugin_error_of([&] {
    impl->forward(s.q.view(), s.k.view(), s.v.view(), s.cache(), builder->build(s.common), {});
  });
  EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
  EXPECT_THAT(e.what(), HasSubstr("FIXTURE: output must be [tokens, 4, 64]"));

  // No bad call reached the plugin: the next good one is its next call.
  EXPECT_EQ(reaching_call(s.q.view()), first + 1);
}

TEST_F(PluginAdapter, LibraryStaysLoadedWhileAnythingMadeFromItLives) {
  auto impl = backend_->make_impl(layer_);
  auto builder = backend_->make_builder(spec_, layer_);
  backend_.reset();
  registry_.reset();  // the registry and its backend instances are gone
  ASSERT_TRUE(testing::library_is_loaded(kOk));
  EXPECT_EQ(fixture_live_objects(), 2);
  // The plugin's code still runs (and still reports errors) through the survivors.
  const OneTokenStep s;
  const AttentionMetadata& plan = builder->build(s.common);
  EXPECT_EQ(plugin_error_of([&] {
              impl->forward(s.q.view(), s.k.view(), s.v.view(), s.cache(), plan, s.out.view());
            }).code(),
            ErrorCode::kPluginError);
  impl.reset();
  EXPECT_TRUE(testing::library_is_loaded(kOk));
  builder.reset();
  EXPECT_FALSE(testing::library_is_loaded(kOk));
}

}  // namespace
}  // namespace attnkit
