// Plugin backends in the runtime: the example plugin serves a model's sliding-window layers
// through real steps (checked against dense attention), and a plugin whose forward fails
// mid-run is reported as attnkit::Error — by the library and by `attnkit run` — not a crash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "attnkit/model/model_loader.h"
#include "attnkit/plugin/plugin_loader.h"
#include "attnkit/runtime/model_runner.h"
#include "plugin/plugin_test_util.h"

namespace attnkit {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kExample = ATTNKIT_EXAMPLE_PLUGIN_PATH;
const std::string kFixture = ATTNKIT_PLUGIN_FIXTURE_OK;

RunnerOptions small_run() {
  RunnerOptions o;
  o.dtype = DType::kFloat32;
  o.max_layers_per_kind = 1;
  o.window_cap = 16;
  o.kv_cache_memory = size_t{16} << 20;
  o.scheduler.max_batch_tokens = 32;
  o.seed = 3;
  o.verify.enabled = true;
  o.verify.samples_per_layer_step = 0;  // every row
  return o;
}

std::vector<RequestSpec> small_workload() {
  return make_workload(WorkloadOptions{
      .num_requests = 3, .min_prompt_len = 6, .max_prompt_len = 40, .output_len = 5, .seed = 3});
}

TEST(PluginRun, ExamplePluginServesTheSlidingWindowLayers) {
  BackendRegistry registry(BackendRegistry::Contents::kBuiltins);
  load_plugin(kExample, registry);
  const Selector selector(
      parse_attention_config(R"({"backend_per_kind": {"sliding_window": "EXAMPLE_CPU"}})",
                             registry),
      registry);
  ModelRunner runner(load_model(std::string(ATTNKIT_MODELS_DIR) + "/gemma-3-1b-it.json"),
                     cpu_platform(), selector, small_run());
  const RunReport report = runner.run(small_workload());
  bool sliding_seen = false;
  for (const GroupRunReport& g : report.groups) {
    if (g.kind != KvCacheKind::kSlidingWindow) continue;
    sliding_seen = true;
    EXPECT_THAT(g.backends_planned, ElementsAre("EXAMPLE_CPU"));
    EXPECT_THAT(g.backends_executed, ElementsAre("EXAMPLE_CPU"));
    EXPECT_GT(g.forward_calls, 0);
  }
  EXPECT_TRUE(sliding_seen);
  ASSERT_TRUE(report.verify.has_value());
  EXPECT_TRUE(report.verify->passed) << report.verify->max_rel_error;
  EXPECT_GT(report.verify->rows_checked, 0);
}

TEST(PluginRun, ForwardErrorMidRunIsAnError) {
  BackendRegistry registry(BackendRegistry::Contents::kBuiltins);
  load_plugin(kFixture, registry);
  const Selector selector(parse_attention_config(R"({"backend": "FIXTURE"})", registry), registry);
  ModelRunner runner(load_model(std::string(ATTNKIT_MODELS_DIR) + "/llama-3.1-8b-instruct.json"),
                     cpu_platform(), selector, small_run());  // start-up succeeds
  const Error e = testing::plugin_error_of([&] { runner.run(small_workload()); });
  EXPECT_EQ(e.code(), ErrorCode::kPluginError);
  EXPECT_THAT(e.what(), HasSubstr("plugin backend FIXTURE"));
  EXPECT_THAT(e.what(), HasSubstr("impl_forward: internal error: FIXTURE computes nothing"));
}

struct CliResult {
  int exit_code = -1;
  std::string output;
};

CliResult run_cli(const std::string& args) {
  const std::string command = std::string("env -u ATTNKIT_PLUGIN_PATH ") + ATTNKIT_CLI_PATH + " " +
                              args + " </dev/null 2>&1";
  CliResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer{};
  size_t n = 0;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    result.output.append(buffer.data(), n);
  }
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

const std::string kSmall =
    " run --requests 3 --prompt-len 8:40 --output-len 4 --max-layers-per-kind 1 --window-cap 16 "
    "--max-batch-tokens 32 --kv-cache-memory 8MiB --quiet ";

TEST(PluginRun, RunCommandExecutesThePluginAndVerifies) {
  const CliResult r = run_cli(
      "--plugin " + kExample + kSmall +
      R"(--verify --json --attention-config '{"backend_per_kind": {"sliding_window": "EXAMPLE_CPU"}}')");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  bool sliding_seen = false;
  for (const auto& g : j["kv_cache_groups"]) {
    if (g["kind"] != "sliding_window") continue;
    sliding_seen = true;
    EXPECT_EQ(g["backend_executed"], "EXAMPLE_CPU") << g.dump();
  }
  EXPECT_TRUE(sliding_seen) << r.output;
  EXPECT_EQ(j["verify"]["passed"], true) << r.output;
}

TEST(PluginRun, RunCommandReportsAPluginFailureAndExitsNonZero) {
  const CliResult r =
      run_cli("--plugin " + kFixture + kSmall +
              R"(--model llama-3.1-8b-instruct --attention-config '{"backend": "FIXTURE"}')");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("attnkit: error: plugin backend FIXTURE"));
  EXPECT_THAT(r.output, HasSubstr("FIXTURE computes nothing"));
}

}  // namespace
}  // namespace attnkit
