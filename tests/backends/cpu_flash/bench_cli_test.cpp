// `attnkit bench` end to end: a tiny shape through the real binary, JSON fields present and
// consistent, and user errors reported with the bad value.

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "attnkit/bench/machine_ceilings.h"
#include "attnkit/kernels/cpu_isa.h"

namespace {

struct CliResult {
  int status = 0;
  std::string out;
};

CliResult run_cli(const std::string& args, const std::string& env = "") {
  const std::string cmd =
      (env.empty() ? "" : env + " ") + std::string(ATTNKIT_CLI_PATH) + " " + args + " 2>&1";
  CliResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (pipe == nullptr) return {-1, ""};
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.out.append(buf.data(), n);
  r.status = pclose(pipe);
  return r;
}

TEST(BenchCli, JsonReportForOneShape) {
  const CliResult r = run_cli(
      "bench --backend cpu_flash --heads 4/2 --head-size 64 --batch 2 --context 300 "
      "--query-len 3 --causal --sinks --kv-cache-dtype fp8_e4m3 --block-size 32 --threads 1 "
      "--repeats 2 --warmup 1 --read-buffer-mb 8 --json");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["backend"], "CPU_FLASH");
  EXPECT_EQ(j["threads"], 1);
  EXPECT_GT(j["median_us"].get<double>(), 0.0);
  EXPECT_GT(j["kv_gb_per_s"].get<double>(), 0.0);
  EXPECT_GT(j["gflop_per_s"].get<double>(), 0.0);
  EXPECT_GT(j["read_gb_per_s_ceiling"].get<double>(), 0.0);
  // 2 requests x 300 keys x 2 KV heads x (64 + 64) x 1 byte.
  EXPECT_DOUBLE_EQ(j["kv_bytes"].get<double>(), 2.0 * 300 * 2 * 128);
  EXPECT_NEAR(j["kv_gb_per_s"].get<double>(),
              j["kv_bytes"].get<double>() / j["median_us"].get<double>() / 1e3, 1e-9);
}

// The CUDA benchmarks' graphs: a multiple of the sets, a replay of at least ~3 ms, at most
// max(sets, 1024) calls.
TEST(GraphReplayCalls, SizesAReplayOfAboutThreeMilliseconds) {
  using attnkit::bench::graph_replay_calls;
  EXPECT_EQ(graph_replay_calls(4, 0.0078125), 384);  // 96 rounds of 4 sets: 3 ms exactly
  EXPECT_EQ(graph_replay_calls(3, 0.007), 429);      // ceil(3 / 0.021) = 143 rounds of 3
  EXPECT_EQ(graph_replay_calls(4, 1e-4), 1024);      // capped
  EXPECT_EQ(graph_replay_calls(2000, 0.05), 2000);   // every set once, past the cap
  EXPECT_EQ(graph_replay_calls(8, 2.0), 8);          // one round already lasts 16 ms
  EXPECT_EQ(graph_replay_calls(4, 0.0), 1024);       // no time measured: the cap
}

// The KV cache is replicated past 256 MiB so that each repeat reads it from memory, unless
// --cache-resident asks for one copy read by every repeat.
TEST(BenchCli, CacheResidentReadsOneCopy) {
  const std::string shape =
      "bench --backend cpu_flash --heads 4/2 --head-size 64 --batch 1 --context 64 --threads 1 "
      "--repeats 2 --warmup 1 --read-buffer-mb 8 --json";
  const CliResult rotated = run_cli(shape);
  ASSERT_EQ(rotated.status, 0) << rotated.out;
  const nlohmann::json r = nlohmann::json::parse(rotated.out);
  // 64 keys x 2 KV heads x 128 bytes x 2 (K, V) = 32 KiB per copy: the most replicas, 64.
  EXPECT_EQ(r["kv_replicas"], 64);
  const CliResult resident = run_cli(shape + " --cache-resident");
  ASSERT_EQ(resident.status, 0) << resident.out;
  const nlohmann::json c = nlohmann::json::parse(resident.out);
  EXPECT_EQ(c["kv_replicas"], 1);
  EXPECT_GT(c["median_us"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(c["kv_bytes"].get<double>(), r["kv_bytes"].get<double>());
}

// The FLOP ceiling follows the kernels that run: forced scalar kernels of a bf16 shape are held
// to the scalar FMA loop, not to a SIMD or bf16-dot rate they cannot issue.
TEST(BenchCli, CeilingsFollowTheForcedCpuIsa) {
  const CliResult r = run_cli(
      "bench --backend cpu_flash --heads 4/2 --head-size 64 --batch 1 --context 64 "
      "--dtype bf16 --kv-cache-dtype bf16 --threads 1 --repeats 1 --warmup 0 "
      "--read-buffer-mb 8 --json",
      "ATTNKIT_CPU_ISA=scalar");
  ASSERT_EQ(r.status, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["cpu_isa"], "scalar");
  EXPECT_EQ(j["fma_isa"], "scalar");
  EXPECT_EQ(j["bf16_dot_gflop_per_s_ceiling"].get<double>(), 0.0);
  EXPECT_GT(j["fma_gflop_per_s_ceiling"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(j["flop_ceiling_gflop_per_s"].get<double>(),
                   j["fma_gflop_per_s_ceiling"].get<double>());
}

// A bf16 prefill shape on a machine that runs the AMX tile kernels is held to the tile rate;
// with them switched off, to the bf16-dot rate of the kernels that then run.
TEST(BenchCli, CeilingsFollowTheAmxSwitch) {
  if (!attnkit::cpu::amx_bf16_available()) {
    GTEST_SKIP() << "this machine cannot run AMX-BF16 tile kernels (CPU or OS)";
  }
  const std::string cmd =
      "bench --backend cpu_flash --heads 4/2 --head-size 64 --batch 1 --context 64 --query-len 16 "
      "--dtype bf16 --kv-cache-dtype bf16 --threads 1 --repeats 1 --warmup 0 --read-buffer-mb 8 "
      "--json";
  CliResult r = run_cli(cmd, "ATTNKIT_CPU_ISA=avx512");
  ASSERT_EQ(r.status, 0) << r.out;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_GT(j["amx_bf16_gflop_per_s_ceiling"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(j["flop_ceiling_gflop_per_s"].get<double>(),
                   j["amx_bf16_gflop_per_s_ceiling"].get<double>());
  r = run_cli(cmd, "ATTNKIT_CPU_ISA=avx512 ATTNKIT_CPU_AMX=0");
  ASSERT_EQ(r.status, 0) << r.out;
  j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["amx_bf16_gflop_per_s_ceiling"].get<double>(), 0.0);
  EXPECT_DOUBLE_EQ(j["flop_ceiling_gflop_per_s"].get<double>(),
                   j["bf16_dot_gflop_per_s_ceiling"].get<double>());
}

TEST(BenchCli, BadValuesAreNamed) {
  CliResult r = run_cli("bench --heads 32/5");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("--heads '32/5'"), std::string::npos) << r.out;
  r = run_cli("bench --backend NOPE --read-buffer-mb 8");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("NOPE"), std::string::npos) << r.out;
  r = run_cli("bench --context 10 --query-len 20");
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.out.find("--query-len 20"), std::string::npos) << r.out;
}

}  // namespace
