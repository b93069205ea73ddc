// The attnkit executable keeps stdout for its output: logging (selector warnings) goes to
// stderr for every command, so --json output always parses; the checked mode's switches
// reject bad values by name.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/cli_runner.h"

namespace attnkit {
namespace {

using ::testing::HasSubstr;
using testing::run_cli;

// CPU_MLA cannot serve Gemma-3's layers (not MLA): in prefer mode the selector falls back
// to automatic selection and logs a warning naming CPU_MLA.
constexpr const char* kPreferConfig =
    R"( --attention-config '{"backend": "CPU_MLA", "override_mode": "prefer"}')";

void expect_json(const testing::CliResult& r) {
  ASSERT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json parsed;
  EXPECT_NO_THROW(parsed = nlohmann::json::parse(r.out)) << r.out;
  EXPECT_FALSE(parsed.is_null()) << r.out;
}

TEST(CliOutput, BackendsJsonIsOnlyJson) { expect_json(run_cli("backends --json")); }

// A model path that is not UTF-8 used to make the JSON dump throw after the whole run
// (exit 2, the report lost); the bytes are replaced by U+FFFD instead.
TEST(CliOutput, JsonOutputSurvivesPathsThatAreNotUtf8) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "attnkit_\xff_model";
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(std::string(ATTNKIT_MODELS_DIR) + "/llama-3.1-8b-instruct.json",
                             dir / "config.json",
                             std::filesystem::copy_options::overwrite_existing);
  const std::string path = "'" + dir.string() + "'";
  expect_json(run_cli("explain --json --model " + path));
  expect_json(run_cli("run --json --quiet --requests 1 --max-layers-per-kind 1 --model " + path));
  std::filesystem::remove_all(dir);
}

TEST(CliOutput, ExplainJsonKeepsTheSelectorsWarningOnStderr) {
  const auto r = run_cli(std::string("explain --model gemma-3-1b-it --json") + kPreferConfig);
  expect_json(r);
  EXPECT_THAT(r.err, HasSubstr("Backend CPU_MLA"));
}

TEST(CliOutput, RunJsonKeepsTheSelectorsWarningOnStderr) {
  const auto r = run_cli(std::string("run --model gemma-3-1b-it --json --quiet --requests 2 "
                                     "--prompt-len 8 --output-len 2 --max-layers-per-kind 1 "
                                     "--window-cap 16 --dtype float32") +
                         kPreferConfig);
  expect_json(r);
  EXPECT_THAT(r.err, HasSubstr("Backend CPU_MLA"));
}

TEST(CliOutput, CheckedModeSwitchesRejectBadValues) {
  const std::string run =
      "run --quiet --requests 1 --prompt-len 4 --output-len 2 "
      "--max-layers-per-kind 1 --window-cap 16 --dtype float32";
  const auto env = run_cli(run, "ATTNKIT_CHECKED=maybe");
  EXPECT_EQ(env.exit_code, 1);
  EXPECT_THAT(env.err,
              HasSubstr("ATTNKIT_CHECKED=maybe is not valid (valid: 1, 0, on, off, true, false)"));
  const auto flag = run_cli(run + " --checked maybe");
  EXPECT_NE(flag.exit_code, 0);
  EXPECT_THAT(flag.err, HasSubstr("--checked"));
  EXPECT_EQ(run_cli(run + " --checked on").exit_code, 0);
  EXPECT_EQ(run_cli(run + " --checked off", "ATTNKIT_CHECKED=maybe").exit_code, 0);
}

}  // namespace
}  // namespace attnkit
