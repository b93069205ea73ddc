// The attnkit executable: --version, --help, `backends` (text and JSON, local and
// described platforms) and how user errors are reported.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "attnkit/build_config.h"
#include "attnkit/registry/registry.h"
#include "cli/cli_runner.h"

namespace attnkit {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using testing::run_cli;

std::vector<std::string> builtin_names() {
  std::vector<std::string> names;
  for (const BuiltinBackend& b : builtin_backends()) names.emplace_back(b.name);
  return names;
}

TEST(Cli, VersionPrintsTheProjectVersion) {
  const auto r = run_cli("--version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out, std::string("attnkit ") + ATTNKIT_VERSION_STRING + "\n");
}

TEST(Cli, HelpListsCommandsAndEveryCommandHasHelp) {
  const auto r = run_cli("--help");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, HasSubstr("backends"));
  const auto b = run_cli("backends --help");
  EXPECT_EQ(b.exit_code, 0);
  EXPECT_THAT(b.out, HasSubstr("--platform"));
  EXPECT_THAT(b.out, HasSubstr("--json"));
}

TEST(Cli, NoCommandOrUnknownOptionIsAUsageError) {
  const auto none = run_cli("");
  EXPECT_NE(none.exit_code, 0);
  EXPECT_THAT(none.err, HasSubstr("subcommand is required"));
  const auto bad = run_cli("backends --no-such-flag");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_THAT(bad.err, HasSubstr("--no-such-flag"));
}

TEST(CliBackends, TextListsEveryBuiltinAndTheReservedName) {
  const auto r = run_cli("backends --platform cpu");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("on platform cpu:"));
  for (const std::string& name : builtin_names()) {
    EXPECT_THAT(r.out, HasSubstr("\n" + name + " [built-in]: ")) << name;
  }
  EXPECT_THAT(r.out, HasSubstr("CUSTOM [reserved]"));
  EXPECT_THAT(r.out, HasSubstr("head_sizes"));
  EXPECT_THAT(r.err, IsEmpty());
}

TEST(CliBackends, JsonHasEveryBuiltinWithCapabilitiesAndRunnability) {
  const auto r = run_cli("backends --platform cpu --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  EXPECT_TRUE(json["schema_version"].is_number_integer());
  EXPECT_EQ(json["schema_version"], 1);
  EXPECT_EQ(json["platform"], "cpu");
  EXPECT_EQ(json["platform_is_local"], true);
  EXPECT_EQ(json["reserved"], nlohmann::json::array({"CUSTOM"}));
  std::vector<std::string> names;
  for (const auto& backend : json["backends"]) {
    names.push_back(backend["name"]);
    EXPECT_EQ(backend["origin"], "built-in");
    // Capabilities are data; the sentences of the text output are capabilities_text.
    const nlohmann::json& caps = backend["capabilities"];
    EXPECT_TRUE(caps["head_sizes"].is_object()) << caps.dump();
    EXPECT_TRUE(caps["kernel_block_sizes"].is_object()) << caps.dump();
    EXPECT_TRUE(caps["dtypes"].is_array()) << caps.dump();
    EXPECT_TRUE(caps["preferred_block_size"].is_number_integer()) << caps.dump();
    EXPECT_TRUE(caps["sinks"].is_boolean()) << caps.dump();
    EXPECT_EQ(caps["compute_capability"].is_null(), caps["platform"] == "cpu") << caps.dump();
    EXPECT_TRUE(backend["capabilities_text"]["head_sizes"].is_string());
    // On the local CPU, exactly the CPU backends are runnable.
    const bool is_cpu_backend = backend["capabilities"]["platform"] == "cpu";
    EXPECT_EQ(backend["runnable"], is_cpu_backend) << backend.dump();
    EXPECT_EQ(backend["reasons"].empty(), is_cpu_backend);
  }
  EXPECT_EQ(names, builtin_names());
}

TEST(CliBackends, DescribedGpuPlatformSaysWhyCpuBackendsCannotRunThere) {
  const auto r = run_cli("backends --platform cuda:9.0 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json json = nlohmann::json::parse(r.out);
  EXPECT_EQ(json["platform"], "cuda:9.0");
  for (const auto& backend : json["backends"]) {
    if (backend["capabilities"]["platform"] != "cpu") {
      // Every CUDA backend runs from sm_80 on.
      EXPECT_EQ(backend["capabilities"]["compute_capability"]["min"],
                nlohmann::json({{"major", 8}, {"minor", 0}}))
          << backend.dump();
      continue;
    }
    EXPECT_EQ(backend["runnable"], false);
    EXPECT_EQ(backend["reasons"], nlohmann::json::array({"runs on cpu, not on cuda:9.0"}));
  }
}

TEST(CliBackends, BadPlatformIsAnErrorOnStderrWithoutACrash) {
  const auto r = run_cli("backends --platform tpu:1.0");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, IsEmpty());
  EXPECT_THAT(r.err, HasSubstr("attnkit: error: Invalid platform 'tpu:1.0'"));
  EXPECT_THAT(r.err, HasSubstr("Valid forms are: cpu, cuda, cuda:MAJOR.MINOR"));
  EXPECT_THAT(r.err, Not(HasSubstr("terminate")));
}

}  // namespace
}  // namespace attnkit
