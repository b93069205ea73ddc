#include "attnkit/selector/selection_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_registry.h"

namespace attnkit {
namespace {

using testing::cpu;
using testing::cuda;
using testing::decoder;
using ::testing::HasSubstr;

class SelectionReportTest : public ::testing::Test {
 protected:
  SelectionReportTest() { testing::register_fake_builtins(registry_); }
  BackendRegistry registry_{BackendRegistry::Contents::kEmpty};
};

TEST_F(SelectionReportTest, TextListsChosenRejectedAndLowerPriorityCandidates) {
  SelectorConfig layer = decoder();
  layer.sliding_window = 512;
  layer.soft_cap = 30.0f;
  const auto result = Selector({}, registry_).select(layer, cpu());
  EXPECT_EQ(to_text(*result, "  "),
            "  sliding_window layer (decoder head_size=128 bfloat16 kv=auto window=512 "
            "soft_cap=30) on cpu: REFERENCE (auto)\n"
            "    priority: built-in rule 'cpu' (platform=cpu): CPU_FLASH, REFERENCE\n"
            "    CPU_FLASH      rejected: logit soft-capping (30) not supported\n"
            "    REFERENCE      chosen\n");
}

TEST_F(SelectionReportTest, TextShowsWarningsUserChoiceAndBinaryNote) {
  registry_.register_backend("CUDA_FLASH", [] {
    auto backend = std::make_unique<testing::FakeBackend>("CUDA_FLASH", testing::cuda_flash_caps());
    backend->with_binary_reason("CUDA kernels are not built into this binary");
    return backend;
  });
  SelectorConfig layer = decoder(128);
  layer.has_sinks = true;
  AttentionConfig config =
      parse_attention_config(R"({"backend": "CUDA_FLASH", "override_mode": "prefer"})", registry_);
  const auto result = Selector(config, registry_).select(layer, cuda(9, 0));
  const std::string text = to_text(*result);
  EXPECT_THAT(text, HasSubstr("on cuda:9.0 (described): CUDA_PAGED (auto; requested CUDA_FLASH "
                              "did not fit)\n"));
  EXPECT_THAT(text, HasSubstr("  CUDA_FLASH     rejected: attention sinks not supported [user "
                              "choice]\n"));
  EXPECT_THAT(text, HasSubstr("  warning: Backend CUDA_FLASH (chosen by the attention config's "
                              "'backend') cannot serve"));
  EXPECT_THAT(text, HasSubstr("note: CUDA kernels are not built into this binary"));
}

TEST_F(SelectionReportTest, JsonCarriesEveryField) {
  SelectorConfig layer = decoder(96);
  layer.block_size = 24;
  const auto result = Selector({}, registry_).select(layer, cpu());
  const nlohmann::json json = to_json(*result);
  EXPECT_EQ(json["backend"], "REFERENCE");
  EXPECT_EQ(json["chosen_by"], "auto");
  EXPECT_EQ(json["requested"], "auto");
  EXPECT_EQ(json["override_mode"], "strict");
  EXPECT_EQ(json["kind"], "full_attention");
  EXPECT_EQ(json["platform"], "cpu");
  EXPECT_EQ(json["platform_is_local"], true);
  EXPECT_EQ(json["runnable"], true);
  EXPECT_TRUE(json["binary_reason"].is_null());
  EXPECT_EQ(json["config"]["head_size"], 96);
  EXPECT_EQ(json["config"]["block_size"], 24);
  EXPECT_TRUE(json["config"]["sliding_window"].is_null());
  EXPECT_EQ(json["config"]["dtype"], "bfloat16");
  ASSERT_EQ(json["candidates"].size(), 2u);
  EXPECT_EQ(json["candidates"][0]["backend"], "CPU_FLASH");
  EXPECT_EQ(json["candidates"][0]["valid"], false);
  EXPECT_EQ(json["candidates"][0]["reasons"],
            nlohmann::json({"head_size 96 not supported (supported: 64, 128, 256)",
                            "block_size 24 not supported (supported: 16)"}));
  EXPECT_EQ(json["candidates"][1]["valid"], true);
  EXPECT_TRUE(json["warnings"].is_array());
}

}  // namespace
}  // namespace attnkit
