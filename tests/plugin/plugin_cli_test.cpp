// `attnkit --plugin PATH` and ATTNKIT_PLUGIN_PATH, through the real command-line tool.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace attnkit {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kExample = ATTNKIT_EXAMPLE_PLUGIN_PATH;
const std::string kFixture = ATTNKIT_PLUGIN_FIXTURE_OK;

struct CliResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs `env_prefix attnkit args` through the shell.
CliResult run_cli(const std::string& args, const std::string& env_prefix = "") {
  const std::string command =
      "env -u ATTNKIT_PLUGIN_PATH " + env_prefix + " " + ATTNKIT_CLI_PATH + " " + args + " 2>&1";
  CliResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.output.append(buffer.data(), n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

TEST(PluginCli, PluginOptionRegistersTheExampleBackend) {
  const CliResult before = run_cli("backends");
  EXPECT_EQ(before.exit_code, 0) << before.output;
  EXPECT_THAT(before.output, Not(HasSubstr("EXAMPLE_CPU")));

  const CliResult r = run_cli("--plugin " + kExample + " backends");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("EXAMPLE_CPU [plugin]: Example plugin"));
  EXPECT_THAT(r.output, HasSubstr("[plugin libattnkit_example_backend.so]"));
}

TEST(PluginCli, PluginOptionIsRepeatableAndWorksAfterTheCommand) {
  const CliResult r = run_cli("backends --plugin " + kExample + " --plugin " + kFixture);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("EXAMPLE_CPU"));
  EXPECT_THAT(r.output, HasSubstr("FIXTURE [plugin]"));
}

TEST(PluginCli, EnvironmentVariableLoadsSeveralLibraries) {
  const CliResult r =
      run_cli("backends --json", "ATTNKIT_PLUGIN_PATH=" + kExample + ":" + kFixture);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("\"name\": \"EXAMPLE_CPU\""));
  EXPECT_THAT(r.output, HasSubstr("\"name\": \"FIXTURE\""));
}

TEST(PluginCli, SameLibraryInEnvironmentAndOptionIsLoadedOnce) {
  const CliResult r =
      run_cli("--plugin " + kExample + " backends", "ATTNKIT_PLUGIN_PATH=" + kExample);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("EXAMPLE_CPU"));
}

TEST(PluginCli, RejectedLibraryIsAnErrorWithItsReason) {
  CliResult r = run_cli("--plugin /nonexistent/libnothing.so backends");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("attnkit: error: plugin library '/nonexistent/libnothing.so' "
                                  "rejected: not found"));

  r = run_cli("backends", std::string("ATTNKIT_PLUGIN_PATH=") + ATTNKIT_PLUGIN_FIXTURE_ABI_TOO_NEW);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("plugin ABI version 2 is too new"));
  EXPECT_THAT(r.output, HasSubstr("(from ATTNKIT_PLUGIN_PATH="));

  r = run_cli("--plugin " + kFixture + " --plugin " + ATTNKIT_PLUGIN_FIXTURE_NO_INIT + " backends");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("missing symbol attnkit_plugin_init"));
}

}  // namespace
}  // namespace attnkit
