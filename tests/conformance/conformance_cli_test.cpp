// `attnkit conformance`: the table, JSON, listing, and the exit status for passing runs,
// unknown backends and filters that select nothing.

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace {

struct CliRun {
  int status = -1;
  std::string output;  // stdout, or stdout + stderr when merged
};

CliRun run_cli(const std::string& args, bool merge_stderr = true) {
  const std::string command =
      std::string(ATTNKIT_CLI_PATH) + " " + args + (merge_stderr ? " 2>&1" : " 2>/dev/null");
  CliRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  char buffer[4096];
  size_t n = 0;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) run.output.append(buffer, n);
  const int status = pclose(pipe);
  run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

TEST(ConformanceCli, PassingRunPrintsTheTableAndExitsZero) {
  const CliRun run = run_cli("conformance --backend reference --filter mixed/float32/kv=auto");
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("PASS   mixed/float32/kv=auto/h128/q8kv2/bs16/NHD"), std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("REFERENCE: 1 passed, 0 failed, 0 skipped of 1 cases"),
            std::string::npos)
      << run.output;
}

TEST(ConformanceCli, JsonOutputParses) {
  const CliRun run =
      run_cli("conformance --backend REFERENCE --json --filter mixed/float16/kv=auto",
              /*merge_stderr=*/false);
  ASSERT_EQ(run.status, 0) << run.output;
  const nlohmann::json j = nlohmann::json::parse(run.output);
  EXPECT_EQ(j["backend"], "REFERENCE");
  EXPECT_EQ(j["ok"], true);
  ASSERT_EQ(j["cases"].size(), 1u);
  EXPECT_EQ(j["cases"][0]["status"], "PASS");
  EXPECT_LE(j["cases"][0]["output_error"].get<double>(),
            j["cases"][0]["output_tolerance"].get<double>());
}

TEST(ConformanceCli, ListShowsCasesWithoutRunningThem) {
  const CliRun run = run_cli("conformance --backend REFERENCE --list --filter window");
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("mixed/bfloat16/kv=auto/h128/q8kv2/bs16/NHD/window=64\n"),
            std::string::npos)
      << run.output;
  EXPECT_EQ(run.output.find("chunk="), std::string::npos) << run.output;
}

TEST(ConformanceCli, UnknownBackendAndEmptySelectionFail) {
  CliRun run = run_cli("conformance --backend NO_SUCH_BACKEND");
  EXPECT_NE(run.status, 0);
  EXPECT_NE(run.output.find("NO_SUCH_BACKEND"), std::string::npos) << run.output;
  EXPECT_NE(run.output.find("REFERENCE"), std::string::npos) << run.output;  // valid options

  run = run_cli("conformance --backend REFERENCE --filter no-case-has-this-name");
  EXPECT_NE(run.status, 0);
  EXPECT_NE(run.output.find("no conformance case ran for backend REFERENCE"), std::string::npos)
      << run.output;

  run = run_cli("conformance");
  EXPECT_NE(run.status, 0);
  EXPECT_NE(run.output.find("--backend"), std::string::npos) << run.output;
}

// A plugin's backend runs through the same suite (the example plugin, built beside the
// CLI when the plugin tests are built).
TEST(ConformanceCli, PluginBackendsRunThroughTheSameSuite) {
  const std::filesystem::path cli(ATTNKIT_CLI_PATH);
  const std::filesystem::path plugin = cli.parent_path().parent_path() / "examples" /
                                       "plugin_backend" / "libattnkit_example_backend.so";
  if (!std::filesystem::exists(plugin)) GTEST_SKIP() << plugin << " is not built";
  const CliRun run =
      run_cli("--plugin " + plugin.string() + " conformance --backend EXAMPLE_CPU --filter window");
  EXPECT_EQ(run.status, 0) << run.output;
  EXPECT_NE(run.output.find("PASS   mixed/bfloat16/kv=auto/h128/q8kv2/bs16/NHD/window=64"),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("EXAMPLE_CPU: 2 passed, 0 failed"), std::string::npos) << run.output;
}

}  // namespace
