#include "attnkit/selector/selector.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "test_registry.h"

namespace attnkit {
namespace {

using testing::cpu;
using testing::cuda;
using testing::decoder;
using ::testing::ElementsAre;
using testing::error_message;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testing::mla_layer;

class SelectorTest : public ::testing::Test {
 protected:
  SelectorTest() { testing::register_fake_builtins(registry_); }
  AttentionConfig config(std::string_view json) { return parse_attention_config(json, registry_); }
  Selector selector(std::string_view json = "{}") { return Selector(config(json), registry_); }

  BackendRegistry registry_{BackendRegistry::Contents::kEmpty};
};

std::vector<std::string> names_of(const SelectionResult& result) {
  std::vector<std::string> names;
  for (const CandidateReport& c : result.candidates) names.push_back(c.backend);
  return names;
}

TEST_F(SelectorTest, AutoTakesTheFirstValidInPriorityOrder) {
  const auto result = selector().select(decoder(128), cpu());
  EXPECT_EQ(result->backend, "CPU_FLASH");
  EXPECT_EQ(result->chosen_by, ChosenBy::kAuto);
  EXPECT_EQ(result->requested, "auto");
  EXPECT_EQ(result->kind, KvCacheKind::kFullAttention);
  EXPECT_EQ(result->platform, "cpu");
  EXPECT_TRUE(result->runnable);
  EXPECT_THAT(names_of(*result), ElementsAre("CPU_FLASH", "REFERENCE"));
  EXPECT_TRUE(result->candidates[0].valid());
  EXPECT_TRUE(result->candidates[1].valid());  // lower priority, still reported
  EXPECT_THAT(result->warnings, IsEmpty());
}

TEST_F(SelectorTest, AutoKeepsEveryRejectedCandidatesReasons) {
  SelectorConfig layer = decoder(96);
  layer.has_sinks = true;
  const auto result = selector().select(layer, cpu());
  EXPECT_EQ(result->backend, "REFERENCE");
  EXPECT_EQ(result->kind, KvCacheKind::kFullAttention);  // learned sinks keep the kind
  ASSERT_EQ(result->candidates.size(), 2u);
  EXPECT_THAT(result->candidates[0].reasons,
              ElementsAre("head_size 96 not supported (supported: 64, 128, 256)",
                          "attention sinks not supported"));
}

TEST_F(SelectorTest, CudaWalkPutsMlaFirstForMlaLayersAndNeverTriesReference) {
  const auto mla = selector().select(mla_layer(), cuda(9, 0));
  EXPECT_EQ(mla->backend, "CUDA_MLA");
  EXPECT_EQ(mla->kind, KvCacheKind::kMlaAttention);
  EXPECT_THAT(names_of(*mla), ElementsAre("CUDA_MLA", "CUDA_FLASH", "CUDA_PAGED"));

  const auto plain = selector().select(decoder(128), cuda(9, 0));
  EXPECT_EQ(plain->backend, "CUDA_FLASH");
  EXPECT_THAT(names_of(*plain), ElementsAre("CUDA_FLASH", "CUDA_PAGED"));

  // CUDA_FLASH stops at 9.0: on 10.0 the walk falls through to CUDA_PAGED.
  const auto blackwell = selector().select(decoder(128), cuda(10, 0));
  EXPECT_EQ(blackwell->backend, "CUDA_PAGED");
  EXPECT_THAT(blackwell->candidates[0].reasons,
              ElementsAre("compute capability 10.0 is above the maximum 9.0"));
}

TEST_F(SelectorTest, NothingValidListsEveryCandidateWithReasons) {
  SelectorConfig layer = mla_layer();
  layer.dtype = DType::kFloat32;
  EXPECT_EQ(
      error_message([&] { selector().select(layer, cuda(9, 0)); }),
      "No attention backend can serve this mla_attention layer (decoder head_size=576 "
      "head_size_v=512 float32 kv=auto mla(rope=64)) on cuda:9.0. Candidates:\n"
      "  CUDA_MLA: dtype float32 not supported (supported: float16, bfloat16)\n"
      "  CUDA_FLASH: dtype float32 not supported (supported: float16, bfloat16); head_size 576 "
      "not supported (supported: multiples of 32 up to 256); head_size_v 512 differs from "
      "head_size 576, which is not supported; MLA not supported\n"
      "  CUDA_PAGED: MLA not supported");
}

TEST_F(SelectorTest, NothingRegisteredForThePlatformIsAnError) {
  BackendRegistry empty(BackendRegistry::Contents::kEmpty);
  Selector s(AttentionConfig{}, empty);
  try {
    s.select(decoder(), cpu());
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_THAT(e.what(), HasSubstr("Candidates:\n  (none registered)"));
  }
}

TEST_F(SelectorTest, GlobalChoiceWinsWhenValid) {
  const auto result = selector(R"({"backend": "reference"})").select(decoder(), cpu());
  EXPECT_EQ(result->backend, "REFERENCE");
  EXPECT_EQ(result->chosen_by, ChosenBy::kGlobal);
  EXPECT_EQ(result->requested, "REFERENCE");
  ASSERT_EQ(result->candidates.size(), 1u);
  EXPECT_TRUE(result->candidates[0].user_choice);
}

TEST_F(SelectorTest, StrictInvalidChoiceIsAnErrorListingItsReasons) {
  SelectorConfig layer = decoder(128);
  layer.has_sinks = true;
  try {
    selector(R"({"backend": "CPU_FLASH"})").select(layer, cpu());
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_STREQ(e.what(),
                 "Backend CPU_FLASH (chosen by the attention config's 'backend') cannot serve "
                 "this full_attention layer (decoder head_size=128 bfloat16 kv=auto sinks) "
                 "on cpu: attention sinks not supported. Set override_mode to 'prefer' to fall "
                 "back to automatic selection.");
  }
}

TEST_F(SelectorTest, PreferInvalidChoiceFallsBackToAutoWithAWarning) {
  SelectorConfig layer = decoder(128);
  layer.has_sinks = true;
  const auto result =
      selector(R"({"backend": "CPU_FLASH", "override_mode": "prefer"})").select(layer, cpu());
  EXPECT_EQ(result->backend, "REFERENCE");
  EXPECT_EQ(result->chosen_by, ChosenBy::kAuto);
  EXPECT_EQ(result->requested, "CPU_FLASH");
  EXPECT_THAT(names_of(*result), ElementsAre("CPU_FLASH", "CPU_FLASH", "REFERENCE"));
  EXPECT_TRUE(result->candidates[0].user_choice);
  EXPECT_FALSE(result->candidates[1].user_choice);
  EXPECT_THAT(result->warnings,
              ElementsAre("Backend CPU_FLASH (chosen by the attention config's 'backend') cannot "
                          "serve this full_attention layer (decoder head_size=128 bfloat16 "
                          "kv=auto sinks) on cpu: attention sinks not supported; falling back to "
                          "automatic selection (override_mode 'prefer')"));
}

TEST_F(SelectorTest, PreferWithNothingValidStillFails) {
  SelectorConfig layer = mla_layer();
  layer.dtype = DType::kFloat32;
  const std::string message = error_message([&] {
    selector(R"({"backend": "CUDA_FLASH", "override_mode": "prefer"})").select(layer, cuda(9, 0));
  });
  EXPECT_THAT(message, HasSubstr("No attention backend can serve"));
  EXPECT_THAT(message, HasSubstr("CUDA_FLASH (user choice): dtype float32 not supported"));
}

TEST_F(SelectorTest, PerKindOverridesGlobalAndOtherKindsFallBackToGlobal) {
  const Selector s =
      selector(R"({"backend": "REFERENCE", "backend_per_kind": {"sliding_window": "CPU_FLASH"}})");
  SelectorConfig windowed = decoder();
  windowed.sliding_window = 512;
  const auto w = s.select(windowed, cpu());
  EXPECT_EQ(w->kind, KvCacheKind::kSlidingWindow);
  EXPECT_EQ(w->backend, "CPU_FLASH");
  EXPECT_EQ(w->chosen_by, ChosenBy::kPerKind);

  const auto full = s.select(decoder(), cpu());
  EXPECT_EQ(full->backend, "REFERENCE");
  EXPECT_EQ(full->chosen_by, ChosenBy::kGlobal);
}

TEST_F(SelectorTest, PerKindWithoutGlobalFallsBackToAuto) {
  const Selector s = selector(R"({"backend_per_kind": {"sliding_window": "REFERENCE"}})");
  const auto full = s.select(decoder(), cpu());
  EXPECT_EQ(full->backend, "CPU_FLASH");
  EXPECT_EQ(full->chosen_by, ChosenBy::kAuto);
  SelectorConfig windowed = decoder();
  windowed.sliding_window = 128;
  EXPECT_EQ(s.select(windowed, cpu())->backend, "REFERENCE");
}

TEST_F(SelectorTest, PerKindAutoBeatsTheGlobalChoice) {
  const Selector s =
      selector(R"({"backend": "REFERENCE", "backend_per_kind": {"full_attention": "auto"}})");
  const auto full = s.select(decoder(), cpu());
  EXPECT_EQ(full->backend, "CPU_FLASH");
  EXPECT_EQ(full->chosen_by, ChosenBy::kAuto);
  EXPECT_EQ(s.choice_for(KvCacheKind::kSlidingWindow),
            std::make_pair(std::string("REFERENCE"), ChosenBy::kGlobal));
}

TEST_F(SelectorTest, StrictPerKindErrorNamesTheKindEntry) {
  SelectorConfig windowed = decoder(96);
  windowed.sliding_window = 64;
  EXPECT_THAT(error_message([&] {
                selector(R"({"backend_per_kind": {"sliding_window": "CPU_FLASH"}})")
                    .select(windowed, cpu());
              }),
              HasSubstr("Backend CPU_FLASH (chosen by backend_per_kind['sliding_window']) cannot "
                        "serve this sliding_window layer"));
}

TEST_F(SelectorTest, EnvironmentChoiceIsReportedAsEnv) {
  const Selector s(apply_backend_env(AttentionConfig{}, "reference", registry_), registry_);
  const auto result = s.select(decoder(), cpu());
  EXPECT_EQ(result->backend, "REFERENCE");
  EXPECT_EQ(result->chosen_by, ChosenBy::kEnv);
  const Selector gpu(apply_backend_env(AttentionConfig{}, "CPU_FLASH", registry_), registry_);
  EXPECT_THAT(error_message([&] { gpu.select(decoder(), cuda(9, 0)); }),
              HasSubstr("Backend CPU_FLASH (chosen by ATTNKIT_ATTENTION_BACKEND) cannot serve"));
}

TEST_F(SelectorTest, UserBlockSizeThatPrecludesAHigherPriorityBackendWarns) {
  SelectorConfig layer = decoder();
  layer.block_size = 24;  // CPU_FLASH kernels take 16-token blocks: 24 is not a multiple
  const auto result = selector().select(layer, cpu());
  EXPECT_EQ(result->backend, "REFERENCE");
  EXPECT_THAT(result->warnings,
              ElementsAre("User block size 24 precluded higher-priority backend CPU_FLASH "
                          "(block_size 24 not supported (supported: 16)); selected REFERENCE "
                          "instead"));
  // 32 = two 16-token kernel blocks: no warning.
  layer.block_size = 32;
  const auto fine = selector().select(layer, cpu());
  EXPECT_EQ(fine->backend, "CPU_FLASH");
  EXPECT_THAT(fine->warnings, IsEmpty());
}

TEST_F(SelectorTest, NoBlockSizeWarningWhenTheBackendFailsForOtherReasonsToo) {
  SelectorConfig layer = decoder(96);
  layer.block_size = 24;
  const auto result = selector().select(layer, cpu());
  EXPECT_EQ(result->backend, "REFERENCE");
  EXPECT_THAT(result->warnings, IsEmpty());
}

TEST_F(SelectorTest, DescribedPlatformMatchesCapabilitiesAndNotesTheBinary) {
  registry_.register_backend("CUDA_FLASH", [] {
    auto backend = std::make_unique<testing::FakeBackend>("CUDA_FLASH", testing::cuda_flash_caps());
    backend->with_binary_reason("CUDA kernels are not built into this binary");
    return backend;
  });
  const auto result = selector().select(decoder(), cuda(9, 0, /*local=*/false));
  EXPECT_EQ(result->backend, "CUDA_FLASH");
  EXPECT_FALSE(result->platform_is_local);
  EXPECT_FALSE(result->runnable);
  EXPECT_EQ(result->binary_reason, "CUDA kernels are not built into this binary");
  EXPECT_TRUE(result->candidates[0].valid());
  EXPECT_EQ(result->candidates[0].binary_note, "CUDA kernels are not built into this binary");
}

TEST_F(SelectorTest, LocalPlatformRejectsBackendsThisBinaryCannotRun) {
  registry_.register_backend("CUDA_FLASH", [] {
    auto backend = std::make_unique<testing::FakeBackend>("CUDA_FLASH", testing::cuda_flash_caps());
    backend->with_binary_reason("this binary has no kernels for sm_90 (it carries sm_80)");
    return backend;
  });
  const auto result = selector().select(decoder(), cuda(9, 0, /*local=*/true));
  EXPECT_EQ(result->backend, "CUDA_PAGED");
  EXPECT_TRUE(result->runnable);
  EXPECT_THAT(result->candidates[0].reasons,
              ElementsAre("this binary has no kernels for sm_90 (it carries sm_80)"));
  EXPECT_FALSE(result->candidates[0].binary_note.has_value());
}

TEST_F(SelectorTest, CombinationHookReasonsRejectToo) {
  registry_.register_backend("CPU_FLASH", [] {
    auto backend = std::make_unique<testing::FakeBackend>("CPU_FLASH", testing::cpu_flash_caps());
    backend->with_combination_hook([](const SelectorConfig& c, const Platform&) {
      std::vector<std::string> reasons;
      if (c.dtype == DType::kFloat16 && c.head_size == 256) {
        reasons.push_back("float16 with head_size 256 not supported");
      }
      return reasons;
    });
    return backend;
  });
  SelectorConfig layer = decoder(256);
  layer.dtype = DType::kFloat16;
  const auto result = selector().select(layer, cpu());
  EXPECT_EQ(result->backend, "REFERENCE");
  EXPECT_THAT(result->candidates[0].reasons,
              ElementsAre("float16 with head_size 256 not supported"));
}

TEST_F(SelectorTest, ResultsAreCachedPerDistinctConfigAndPlatform) {
  const Selector s = selector();
  const auto first = s.select(decoder(128), cpu());
  const auto again = s.select(decoder(128), cpu());
  EXPECT_EQ(first.get(), again.get());
  EXPECT_EQ(s.cache_size(), 1u);

  const auto other_head = s.select(decoder(64), cpu());
  EXPECT_NE(other_head.get(), first.get());
  const auto other_platform = s.select(decoder(128), cuda(9, 0));
  EXPECT_NE(other_platform.get(), first.get());
  const auto local_gpu = s.select(decoder(128), cuda(9, 0, /*local=*/true));
  EXPECT_NE(local_gpu.get(), other_platform.get());
  EXPECT_EQ(s.cache_size(), 4u);
  EXPECT_EQ(s.select(decoder(64), cpu()).get(), other_head.get());
}

TEST_F(SelectorTest, MovedSelectorKeepsItsCache) {
  Selector original = selector();
  const auto first = original.select(decoder(), cpu());
  Selector moved = std::move(original);
  EXPECT_EQ(moved.select(decoder(), cpu()).get(), first.get());
  Selector assigned = selector(R"({"backend": "REFERENCE"})");
  assigned = std::move(moved);
  EXPECT_EQ(assigned.select(decoder(), cpu()).get(), first.get());
  EXPECT_EQ(assigned.attention_config().backend, "auto");
}

TEST_F(SelectorTest, RegistrationInvalidatesCachedResults) {
  const Selector s = selector();
  const auto before = s.select(decoder(), cpu());
  EXPECT_EQ(before->backend, "CPU_FLASH");
  BackendCapabilities no_bf16 = testing::cpu_flash_caps();
  no_bf16.dtypes = {DType::kFloat32};
  registry_.register_backend("CPU_FLASH", testing::fake_factory("CPU_FLASH", no_bf16));
  const auto after = s.select(decoder(), cpu());
  EXPECT_NE(before.get(), after.get());
  EXPECT_EQ(after->backend, "REFERENCE");
}

TEST_F(SelectorTest, RegisteredBackendIsTriedAfterBuiltins) {
  BackendCapabilities sinks_only = testing::basic_caps();
  sinks_only.sinks = true;
  registry_.register_backend("CUSTOM", testing::fake_factory("CUSTOM", sinks_only));
  // Remove REFERENCE's claim to sinks so that only the custom backend can serve the layer.
  BackendCapabilities reference = testing::full_caps();
  reference.sinks = false;
  registry_.register_backend("REFERENCE", testing::fake_factory("REFERENCE", reference));
  SelectorConfig layer = decoder();
  layer.has_sinks = true;
  const auto result = selector().select(layer, cpu());
  EXPECT_EQ(result->backend, "CUSTOM");
  EXPECT_THAT(names_of(*result), ElementsAre("CPU_FLASH", "REFERENCE", "CUSTOM"));
  EXPECT_EQ(selector(R"({"backend": "custom"})").select(layer, cpu())->chosen_by,
            ChosenBy::kGlobal);
}

TEST(ChosenBy, Spellings) {
  EXPECT_EQ(to_string(ChosenBy::kAuto), "auto");
  EXPECT_EQ(to_string(ChosenBy::kGlobal), "global");
  EXPECT_EQ(to_string(ChosenBy::kPerKind), "per_kind");
  EXPECT_EQ(to_string(ChosenBy::kEnv), "env");
}

}  // namespace
}  // namespace attnkit
