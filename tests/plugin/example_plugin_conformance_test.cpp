// The example plugin, loaded through the loader, passes the conformance suite against
// REFERENCE over everything its capabilities declare — through the library and through
// `attnkit --plugin PATH conformance`.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>

#include "attnkit/conformance/conformance.h"
#include "attnkit/plugin/plugin_loader.h"

namespace attnkit {
namespace {

using ::testing::HasSubstr;

const std::string kExample = ATTNKIT_EXAMPLE_PLUGIN_PATH;

TEST(ExamplePluginConformance, PassesTheQuickSuiteThroughTheLoader) {
  BackendRegistry registry(BackendRegistry::Contents::kEmpty);
  load_plugin(kExample, registry);
  const auto backend = registry.get("EXAMPLE_CPU");
  const conformance::ConformanceReport report = conformance::run_conformance(*backend);
  EXPECT_TRUE(report.ok()) << conformance::format_table(report);
  EXPECT_EQ(report.count(conformance::CaseStatus::kFailed), 0);
  // Every dtype and the sliding window were exercised.
  int windowed = 0;
  for (const auto& r : report.results) {
    if (r.status == conformance::CaseStatus::kPassed &&
        r.name.find("window") != std::string::npos) {
      ++windowed;
    }
  }
  EXPECT_GT(windowed, 0) << conformance::format_table(report);
  for (const char* dtype : {"/float32/", "/float16/", "/bfloat16/"}) {
    bool seen = false;
    for (const auto& r : report.results) {
      seen = seen || (r.status == conformance::CaseStatus::kPassed &&
                      r.name.find(dtype) != std::string::npos);
    }
    EXPECT_TRUE(seen) << dtype << "\n" << conformance::format_table(report);
  }
}

TEST(ExamplePluginConformance, CommandLineRunPassesAndExitsZero) {
  const std::string command = std::string("env -u ATTNKIT_PLUGIN_PATH ") + ATTNKIT_CLI_PATH +
                              " --plugin " + kExample +
                              " conformance --backend example_cpu --filter bfloat16 2>&1";
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) output.append(buffer.data(), n);
  const int status = pclose(pipe);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << output;
  EXPECT_THAT(output, HasSubstr("EXAMPLE_CPU: "));
  EXPECT_THAT(output, HasSubstr(" 0 failed"));
}

}  // namespace
}  // namespace attnkit
