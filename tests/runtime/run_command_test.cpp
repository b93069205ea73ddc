// `attnkit run` as a user runs it: the binary, its text and JSON output, its errors.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace {

struct CliResult {
  int exit_code = 0;
  std::string out, err;
};

std::string slurp(const std::filesystem::path& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

CliResult run_cli(const std::string& args) {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string tag = std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
                          ::testing::UnitTest::GetInstance()->current_test_info()->name();
  const auto out = dir / ("attnkit_run_out_" + tag);
  const auto err = dir / ("attnkit_run_err_" + tag);
  const std::string cmd = std::string(ATTNKIT_CLI_PATH) + " run " + args + " >" + out.string() +
                          " 2>" + err.string() + " </dev/null";
  const int status = std::system(cmd.c_str());
  CliResult r{WEXITSTATUS(status), slurp(out), slurp(err)};
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

// Small and quick: two layers of each kind, short windows, two short requests.
const std::string kSmall =
    "--requests 3 --prompt-len 8:40 --output-len 4 --max-layers-per-kind 1 --window-cap 16 "
    "--max-batch-tokens 32 --kv-cache-memory 8MiB ";

TEST(RunCommand, JsonHasTheFieldsOfIssue7) {
  const CliResult r = run_cli(kSmall + "--verify --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["schema_version"], 1);
  EXPECT_EQ(j["model"], "gemma-3-1b-it");
  EXPECT_EQ(j["platform"], "cpu");
  EXPECT_EQ(j["requests"], 3);
  EXPECT_GT(j["steps"].get<int>(), 0);
  EXPECT_GT(j["tokens"].get<int>(), 0);
  EXPECT_GT(j["tokens_per_s"].get<double>(), 0.0);
  EXPECT_EQ(j["preemptions"], 0);
  ASSERT_GE(j["kv_cache_groups"].size(), 2u);
  for (const auto& g : j["kv_cache_groups"]) {
    for (const char* key : {"id", "kind", "layers", "backend_planned", "backend_executed",
                            "blocks_peak", "blocks_total"}) {
      EXPECT_TRUE(g.contains(key)) << key;
    }
    EXPECT_EQ(g["backend_executed"], g["backend_planned"]);
    EXPECT_EQ(g["backends_executed"], g["backends_planned"]);
    EXPECT_TRUE(g["backends_planned"].is_array());
    EXPECT_GT(g["blocks_peak"].get<int>(), 0);
    EXPECT_LE(g["blocks_peak"].get<int>(), g["blocks_total"].get<int>());
  }
  ASSERT_TRUE(j["verify"].is_object());
  EXPECT_TRUE(j["verify"]["passed"].get<bool>());
  EXPECT_LE(j["verify"]["max_rel_error"].get<double>(), j["verify"]["tolerance"].get<double>());
  // Not a terminal: plain progress lines on stderr, stdout stays pure JSON.
  EXPECT_NE(r.err.find("progress: 3/3 requests finished"), std::string::npos) << r.err;
}

TEST(RunCommand, VerifyIsNullWhenNotAsked) {
  const CliResult r = run_cli(kSmall + "--json --quiet");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(nlohmann::json::parse(r.out)["verify"].is_null());
  EXPECT_EQ(r.err, "");
}

TEST(RunCommand, TextShowsSelectionThroughputBlocksAndVerification) {
  // Cross attention on REFERENCE: see the whisper case of model_runner_test.cpp.
  const CliResult r = run_cli(kSmall + "--verify --model whisper-tiny --encoder-len 10:20 " +
                              R"(--attention-config '{"backend_per_kind": )" +
                              R"({"cross_attention": "REFERENCE"}}')");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* want :
       {"Selection", "cross_attention", "Throughput:", "tokens/s", "GB/s", "KV cache: peak",
        "preemptions: 0", "Verification: PASSED", "encoder tokens"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  }
}

TEST(RunCommand, PerKindMappingShowsInWhatRan) {
  const CliResult r = run_cli(
      kSmall + R"(--json --quiet --attention-config '{"backend_per_kind": {"sliding_window": )"
               R"("REFERENCE"}}')");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Keep the parsed document alive for the loop (a range over a temporary's member dangles).
  const nlohmann::json report = nlohmann::json::parse(r.out);
  for (const auto& g : report["kv_cache_groups"]) {
    if (g["kind"] == "sliding_window") {
      EXPECT_EQ(g["backend_executed"], "REFERENCE");
      EXPECT_EQ(g["chosen_by"], "per_kind");
    } else {
      EXPECT_EQ(g["chosen_by"], "auto");
    }
  }
}

TEST(RunCommand, BadInputIsAClearError) {
  struct Case {
    std::string args, expect;
  };
  for (const Case& c : std::vector<Case>{
           {"--prompt-len 9:3", "MIN:MAX"},
           {"--prompt-len abc", "'abc'"},
           {"--requests 0", "--requests: Value 0 not in range 1 to 1048576"},
           {"--kv-cache-memory 12XB", "12XB"},
           {"--num-blocks 1", "--num-blocks: Value 1 not in range 2 to 16777216"},
           {"--num-blocks 10 --kv-cache-memory 1MiB", "excludes"},
           {"--model no-such-model", "gemma-3-1b-it"},
           {"--platform cuda:9.0", "cuda:9.0"},
           {"--dtype float64", "float64"},
           {R"(--attention-config '{"backend_per_kind": {"sliding_window": "NOPE"}}')", "NOPE"},
           {"--max-layers-per-kind 1 --num-blocks 3 --block-size 16 --prompt-len 100 "
            "--requests 1",
            "request 0 can never fit the KV cache: its 115 tokens (prompt 100 + output 16)"},
       }) {
    const CliResult r = run_cli(c.args + " --quiet");
    EXPECT_NE(r.exit_code, 0) << c.args;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.args << "\n" << r.err;
  }
}

}  // namespace
