// End-to-end runs of every model family through the automatically selected backends,
// checked row by row against dense attention over each request's full history.
#include "attnkit/runtime/model_runner.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <numeric>

#include "attnkit/core/error.h"
#include "runner_test_support.h"

namespace attnkit {
namespace {

using ::testing::HasSubstr;

using testing::group_of_kind;
using testing::run_small;
using testing::SmallRun;

struct FamilyCase {
  std::string model;
  std::vector<KvCacheKind> kinds;     // kinds the reduced model must run
  std::string attention_config = {};  // empty = automatic selection
};

void PrintTo(const FamilyCase& c, std::ostream* os) { *os << c.model; }

class EveryFamily : public ::testing::TestWithParam<FamilyCase> {};

TEST_P(EveryFamily, RunsEveryLayerKindAndMatchesDenseAttention) {
  SmallRun s;
  s.model = GetParam().model;
  s.attention_config = GetParam().attention_config;
  const RunReport r = run_small(s);

  ASSERT_TRUE(r.verify.has_value());
  EXPECT_TRUE(r.verify->passed) << to_text(r);
  EXPECT_LE(r.verify->max_rel_error, 1e-3) << to_text(r);
  EXPECT_GT(r.verify->rows_checked, 50);
  std::vector<KvCacheKind> verified;
  for (const KindErrorReport& k : r.verify->by_kind) {
    verified.push_back(k.kind);
    EXPECT_GT(k.rows_checked, 0);
  }
  for (KvCacheKind kind : GetParam().kinds) {
    EXPECT_NE(std::find(verified.begin(), verified.end(), kind), verified.end())
        << "no " << to_string(kind) << " rows verified\n"
        << to_text(r);
    const GroupRunReport* g = group_of_kind(r, kind);
    ASSERT_NE(g, nullptr) << to_string(kind);
    // What ran is what was selected.
    EXPECT_EQ(g->backends_executed, g->backends_planned) << to_text(r);
    EXPECT_GT(g->forward_calls, 0);
  }
  EXPECT_EQ(r.requests, 4);
  EXPECT_EQ(r.preemptions, 0);
  EXPECT_GT(r.tokens_per_s, 0.0);
  EXPECT_GT(r.attention_gb_per_s, 0.0);
}

INSTANTIATE_TEST_SUITE_P(
    Runtime, EveryFamily,
    ::testing::Values(
        FamilyCase{"gemma-3-1b-it", {KvCacheKind::kSlidingWindow, KvCacheKind::kFullAttention}},
        FamilyCase{"llama-3.1-8b-instruct", {KvCacheKind::kFullAttention}},
        FamilyCase{"mistral-7b-v0.1", {KvCacheKind::kSlidingWindow}},
        FamilyCase{"gpt-oss-20b", {KvCacheKind::kSlidingWindow, KvCacheKind::kFullAttention}},
        // Hybrids: state layers (GDN, Mamba1) in the same pool, against their dense forms.
        FamilyCase{"qwen3-next-80b-a3b-thinking",
                   {KvCacheKind::kMamba, KvCacheKind::kFullAttention}},
        FamilyCase{"jamba-v0.1", {KvCacheKind::kMamba, KvCacheKind::kFullAttention}},
        FamilyCase{"llama-4-scout-17b-16e",
                   {KvCacheKind::kChunkedLocalAttention, KvCacheKind::kFullAttention}},
        FamilyCase{"deepseek-v2-lite", {KvCacheKind::kMlaAttention}},
        // Cross attention on REFERENCE: CPU_FLASH's cache update wants one slot per query
        // token, while cross-attention steps write one slot per encoder token
        // (kv_cache/common_metadata_builder.h), so CPU_FLASH rejects the step that encodes.
        FamilyCase{"whisper-tiny",
                   {KvCacheKind::kEncoderOnlyAttention, KvCacheKind::kFullAttention,
                    KvCacheKind::kCrossAttention},
                   R"({"backend_per_kind": {"cross_attention": "REFERENCE"}})"},
        FamilyCase{"bert-base-uncased", {KvCacheKind::kEncoderOnlyAttention}}),
    [](const ::testing::TestParamInfo<FamilyCase>& param_info) {
      std::string name = param_info.param.model;
      for (char& c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      }
      return name;
    });

TEST(ModelRunner, ABackendPerKindKeyThatMatchesNoLayerIsAWarningOfTheRun) {
  SmallRun s;
  s.model = "llama-3.1-8b-instruct";
  s.attention_config = R"({"backend_per_kind": {"mamba": "MAMBA2"}})";
  const RunReport r = run_small(s);
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_EQ(r.warnings[0],
            "backend_per_kind: 'mamba' (-> MAMBA2) matches no layer of this model, so it has no "
            "effect; the model's kinds are: full_attention");
  EXPECT_THAT(to_text(r), HasSubstr("warning: backend_per_kind: 'mamba'"));
  EXPECT_EQ(to_json(r)["warnings"][0], r.warnings[0]);
  EXPECT_TRUE(r.verify->passed);
}

TEST(ModelRunner, ComputesPromptPlusOutputMinusOneTokensPerRequest) {
  SmallRun s;
  const RunReport r = run_small(s);
  const auto requests = make_workload({.num_requests = s.requests,
                                       .min_prompt_len = s.min_prompt,
                                       .max_prompt_len = s.max_prompt,
                                       .output_len = s.output_len,
                                       .seed = s.seed});
  long expected = 0;
  for (const RequestSpec& q : requests) expected += q.total_computed_tokens();
  EXPECT_EQ(r.tokens, expected);
  EXPECT_EQ(r.generated_tokens, s.requests * s.output_len);
  EXPECT_EQ(r.decode_tokens, s.requests * (s.output_len - 1));
  EXPECT_EQ(r.prefill_tokens + r.decode_tokens, r.tokens);
}

TEST(ModelRunner, SlidingGroupsReleaseBlocksThatFullGroupsKeep) {
  // One long request: the sliding group (window 16) holds a couple of blocks at a time
  // while the full group's table grows with the sequence.
  SmallRun s;
  s.requests = 1;
  s.min_prompt = s.max_prompt = 200;
  s.output_len = 40;
  s.verify_samples = 3;
  const RunReport r = run_small(s);
  EXPECT_TRUE(r.verify->passed) << to_text(r);
  const GroupRunReport* sliding = group_of_kind(r, KvCacheKind::kSlidingWindow);
  const GroupRunReport* full = group_of_kind(r, KvCacheKind::kFullAttention);
  ASSERT_TRUE(sliding && full);
  const int full_blocks = (200 + 40 - 1 + full->block_size - 1) / full->block_size;
  EXPECT_EQ(full->blocks_peak, full_blocks) << to_text(r);
  // The window plus one step's chunk (48 tokens) spans at most this many blocks.
  EXPECT_LE(sliding->blocks_peak, (16 + 48) / sliding->block_size + 2) << to_text(r);
  EXPECT_LT(sliding->blocks_peak, full->blocks_peak);
}

TEST(ModelRunner, PreemptsUnderATinyBlockBudgetAndStaysCorrect) {
  SmallRun s;
  s.model = "llama-3.1-8b-instruct";
  s.requests = 6;
  s.min_prompt = 20;
  s.max_prompt = 40;
  s.output_len = 12;
  s.block_size = 16;
  s.num_blocks = 1 + 9;  // room for about three requests at a time
  const RunReport r = run_small(s);
  EXPECT_GT(r.preemptions, 0) << to_text(r);
  EXPECT_LE(r.blocks_peak, 9);
  EXPECT_TRUE(r.verify->passed) << to_text(r);
  EXPECT_LE(r.verify->max_rel_error, 1e-3);

  // Preempted requests recompute their tokens: more tokens than a roomy cache needs.
  SmallRun roomy = s;
  roomy.num_blocks = 0;
  const RunReport baseline = run_small(roomy);
  EXPECT_EQ(baseline.preemptions, 0);
  EXPECT_GT(r.tokens, baseline.tokens);
  EXPECT_EQ(r.generated_tokens, baseline.generated_tokens);
}

TEST(ModelRunner, IsDeterministicForAFixedSeed) {
  SmallRun s;
  s.model = "gpt-oss-20b";
  s.verify_samples = 2;
  const RunReport a = run_small(s);
  const RunReport b = run_small(s);
  EXPECT_EQ(a.output_checksum, b.output_checksum);
  EXPECT_EQ(a.steps, b.steps);
  EXPECT_EQ(a.tokens, b.tokens);
  EXPECT_EQ(a.verify->max_rel_error, b.verify->max_rel_error);
  EXPECT_EQ(a.verify->rows_checked, b.verify->rows_checked);
  ASSERT_EQ(a.groups.size(), b.groups.size());
  for (size_t g = 0; g < a.groups.size(); ++g) {
    EXPECT_EQ(a.groups[g].blocks_peak, b.groups[g].blocks_peak);
  }
  s.seed = 2;
  const RunReport c = run_small(s);
  EXPECT_NE(a.output_checksum, c.output_checksum);
}

TEST(ModelRunner, Bf16WithAnFp8CacheStaysWithinTheBf16Tolerance) {
  SmallRun s;
  s.dtype = DType::kBFloat16;
  s.kv_cache_dtype = KvCacheDType::kFp8E4M3;
  s.verify_samples = 4;
  const RunReport r = run_small(s);
  EXPECT_TRUE(r.verify->passed) << to_text(r);
  EXPECT_GT(r.verify->max_rel_error, 0.0);  // bf16 outputs are rounded
}

TEST(ModelRunner, RejectsRequestsThatDoNotMatchTheModel) {
  const Selector selector;
  RunnerOptions o;
  o.max_layers_per_kind = 1;
  o.kv_cache_memory = size_t{16} << 20;
  ModelRunner decoder(load_model("gemma-3-1b-it"), cpu_platform(), selector, o);
  const std::vector<RequestSpec> with_encoder{{.id = 0, .prompt_len = 4, .encoder_len = 8}};
  EXPECT_THROW(decoder.run(with_encoder), Error);

  ModelRunner whisper(load_model("whisper-tiny"), cpu_platform(), selector, o);
  EXPECT_TRUE(whisper.is_encoder_decoder());
  const std::vector<RequestSpec> no_encoder{{.id = 0, .prompt_len = 4}};
  try {
    whisper.run(no_encoder);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("encoder length 0"), std::string::npos) << e.what();
  }
}

TEST(ModelRunner, AnImpossiblyLongRequestIsAnOutOfMemoryError) {
  SmallRun s;
  s.model = "llama-3.1-8b-instruct";
  s.requests = 1;
  s.min_prompt = s.max_prompt = 100;
  s.block_size = 16;
  s.num_blocks = 4;
  try {
    run_small(s);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory) << e.what();
    EXPECT_THAT(e.what(), HasSubstr("request 0 can never fit the KV cache"));
    EXPECT_THAT(e.what(), HasSubstr("but only 3 are usable"));
  }
}

// Refused at admission, before any of it is computed: a 1000000-token prompt on a small
// pool used to run prefill chunks for minutes and then fail quoting a chunk's length.
TEST(ModelRunner, ARequestThatCanNeverFitIsRefusedBeforeItRuns) {
  SmallRun s;
  s.model = "gemma-3-1b-it";
  s.requests = 2;
  s.min_prompt = s.max_prompt = 1000000;
  s.block_size = 16;
  s.num_blocks = 2000;
  const auto start = std::chrono::steady_clock::now();
  try {
    run_small(s);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory) << e.what();
    EXPECT_THAT(e.what(), HasSubstr("can never fit the KV cache: its 1000004 tokens (prompt "
                                    "1000000 + output 5)"));
    EXPECT_THAT(e.what(), HasSubstr("but only 1999 are usable"));
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(ModelRunner, RunsOnlyOnThisMachine) {
  const Selector selector;
  RunnerOptions o;
  o.max_layers_per_kind = 1;
  try {
    ModelRunner runner(load_model("gemma-3-1b-it"), parse_platform("cuda:9.0"), selector, o);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("cuda:9.0"), std::string::npos) << e.what();
  }
  o.num_blocks = 1;
  EXPECT_THROW(ModelRunner(load_model("gemma-3-1b-it"), cpu_platform(), selector, o), Error);
}

TEST(ReduceModel, KeepsLayersPerKindAndCapsWindows) {
  const ModelDescription gemma = load_model("gemma-3-1b-it");
  std::vector<std::string> notes;
  const ModelDescription r = reduce_model(gemma, 2, 32, &notes);
  ASSERT_EQ(r.num_attention_layers(), 4);
  int sliding = 0;
  for (const LayerSpec& l : r.layers) {
    if (l.sliding_window) {
      EXPECT_EQ(*l.sliding_window, 32);
      ++sliding;
    }
  }
  EXPECT_EQ(sliding, 2);
  EXPECT_EQ(notes.size(), 2u);
  const ModelDescription same = reduce_model(gemma, 0, 0, &notes);
  EXPECT_EQ(same.layers, gemma.layers);
}

}  // namespace
}  // namespace attnkit
