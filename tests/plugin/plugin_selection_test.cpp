// A plugin backend takes part in selection like a built-in: chosen per kind, as CUSTOM, by
// automatic selection, and rejected with its own reasons.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "attnkit/plugin/plugin_loader.h"
#include "attnkit/selector/selector.h"
#include "plugin/plugin_test_util.h"
#include "support/fake_backend.h"

namespace attnkit {
namespace {

using ::testing::HasSubstr;

const std::string kExample = ATTNKIT_EXAMPLE_PLUGIN_PATH;

SelectorConfig sliding_layer() {
  SelectorConfig c;
  c.head_size = c.head_size_v = 128;
  c.num_heads = 8;
  c.num_kv_heads = 2;
  c.dtype = DType::kBFloat16;
  c.sliding_window = 512;
  return c;
}

class PluginSelection : public ::testing::Test {
 protected:
  void SetUp() override {
    // A fully capable backend first, so automatic selection would not pick the plugin.
    registry_.register_backend("ALL_FEATURES",
                               testing::fake_factory("ALL_FEATURES", testing::full_caps()));
    PluginLoadOptions options;
    options.register_as_custom = "EXAMPLE_CPU";
    load_plugin(kExample, registry_, options);
  }
  BackendRegistry registry_{BackendRegistry::Contents::kEmpty};
};

TEST_F(PluginSelection, BackendPerKindChoosesThePluginForItsKind) {
  const Selector selector(
      parse_attention_config(R"({"backend_per_kind": {"sliding_window": "example_cpu"}})",
                             registry_),
      registry_);
  const auto sliding = selector.select(sliding_layer(), cpu_platform());
  EXPECT_EQ(sliding->backend, "EXAMPLE_CPU");
  EXPECT_EQ(sliding->chosen_by, ChosenBy::kPerKind);

  SelectorConfig full = sliding_layer();
  full.sliding_window.reset();
  EXPECT_EQ(selector.select(full, cpu_platform())->backend, "ALL_FEATURES");
}

TEST_F(PluginSelection, CustomSlotSelectsThePlugin) {
  const Selector selector(parse_attention_config(R"({"backend": "CUSTOM"})", registry_), registry_);
  EXPECT_EQ(selector.select(sliding_layer(), cpu_platform())->backend, "CUSTOM");
  EXPECT_EQ(registry_.get("CUSTOM")->name(), "EXAMPLE_CPU");
}

TEST_F(PluginSelection, StrictChoiceThatCannotServeListsThePluginsReasons) {
  const Selector selector(
      parse_attention_config(R"({"backend_per_kind": {"sliding_window": "EXAMPLE_CPU"}})",
                             registry_),
      registry_);
  SelectorConfig layer = sliding_layer();
  layer.num_kv_heads = 3;  // the plugin's combination hook
  layer.soft_cap = 30.0f;  // a capability it does not declare
  const Error e = testing::plugin_error_of([&] { selector.select(layer, cpu_platform()); });
  EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  EXPECT_THAT(e.what(), HasSubstr("EXAMPLE_CPU"));
  EXPECT_THAT(e.what(), HasSubstr("logit soft-capping (30) not supported"));
  EXPECT_THAT(e.what(), HasSubstr("num_heads 8 is not a multiple of num_kv_heads 3"));
}

TEST_F(PluginSelection, AutomaticSelectionConsidersThePlugin) {
  BackendRegistry only_plugin(BackendRegistry::Contents::kEmpty);
  load_plugin(kExample, only_plugin);
  const Selector selector({}, only_plugin);
  const auto result = selector.select(sliding_layer(), cpu_platform());
  EXPECT_EQ(result->backend, "EXAMPLE_CPU");
  EXPECT_EQ(result->chosen_by, ChosenBy::kAuto);
}

}  // namespace
}  // namespace attnkit
