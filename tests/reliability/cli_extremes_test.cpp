// Bad and extreme inputs to every command, each run as a red-team run ran them (under
// `ulimit -v 4000000` and `timeout 60`): every one must end in a clear error, an exit code
// from 1 to 127 (never a signal, never a hang, never success for a refused value) with a
// message naming the flag or field. The first table holds the inputs that once crashed,
// hung, passed silently or quoted a wrong value; the second replays every numeric flag at
// 0, -1, INT_MAX, INT_MAX + 1, a value beyond 64 bits and a word.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "cli/cli_runner.h"

namespace attnkit {
namespace {

using ::testing::HasSubstr;

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ATTNKIT_TEST_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define ATTNKIT_TEST_TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define ATTNKIT_TEST_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#define ATTNKIT_TEST_TSAN 1
#endif

// The memory bound of a run: `ulimit -v 4000000` (about 3.8 GiB of address space). A
// sanitized executable reserves terabytes of address space for its shadow memory before
// main(), so under AddressSanitizer or ThreadSanitizer the sanitizer's allocator holds the
// same bound instead (no single allocation over 4000 MiB; with ASan, no more than 4000 MiB
// resident). Those allocators end the process with a report rather than throw
// std::bad_alloc, so there a case passes only if the CLI refuses the input before it
// allocates, which is what the flag checks are for.
std::string memory_bound_env() {
#if defined(ATTNKIT_TEST_ASAN)
  return "ASAN_OPTIONS=\"$ASAN_OPTIONS:max_allocation_size_mb=4000:hard_rss_limit_mb=4000\"";
#elif defined(ATTNKIT_TEST_TSAN)
  return "TSAN_OPTIONS=\"$TSAN_OPTIONS max_allocation_size_mb=4000\"";
#else
  return "";
#endif
}

std::string memory_bound_shell() {
#if defined(ATTNKIT_TEST_ASAN) || defined(ATTNKIT_TEST_TSAN)
  return "";
#else
  return "ulimit -v 4000000;";
#endif
}

testing::CliResult run_bounded(const std::string& args) {
  return testing::run_cli(args, memory_bound_env(), memory_bound_shell(), "timeout 60");
}

struct BadInput {
  std::string args;
  std::string message;  // a substring of stderr
};

void expect_clear_error(const BadInput& c) {
  const testing::CliResult r = run_bounded(c.args);
  EXPECT_GE(r.exit_code, 1) << c.args << "\n" << r.err;
  EXPECT_LE(r.exit_code, 127) << c.args << " ended by a signal or timed out\n" << r.err;
  EXPECT_NE(r.exit_code, 124) << c.args << " timed out";
  EXPECT_THAT(r.err, HasSubstr(c.message)) << c.args;
}

std::string write_temp(const std::string& name, const std::string& text) {
  const std::filesystem::path p = std::filesystem::temp_directory_path() / name;
  std::ofstream(p, std::ios::binary) << text;
  return p.string();
}

TEST(CliExtremes, InputsThatOnceCrashedHungOrPassedAreClearErrors) {
  const std::string deep =
      write_temp("attnkit_extremes_deep.json", std::string(100000, '[') + std::string(100000, ']'));
  const std::string dup = write_temp("attnkit_extremes_dup.json",
                                     R"({"backend": "REFERENCE", "backend": "CPU_FLASH"})");
  const std::string inline_deep =
      "'{\"backend\": " + std::string(55000, '[') + std::string(55000, ']') + "}'";
  const std::vector<BadInput> cases = {
      {"explain --model " + deep, "values nest more than 64"},
      {"run --quiet --model " + deep, "values nest more than 64"},
      {"explain --model gemma-3-1b-it --attention-config " + inline_deep,
       "values nest more than 64"},
      {"explain --model gemma-3-1b-it --attention-config " + dup, "duplicate key 'backend'"},
      {"explain --model gemma-3-1b-it --attention-config @", "names no file"},
      {"explain --model gemma-3-1b-it --attention-config /tmp", "is a directory"},
      {"run --quiet --attention-config @" + dup, "duplicate key 'backend'"},
      {"explain --model /dev/null", "is not a regular file"},
      {"bench --context 2147483647", "--context"},
      {"bench --threads 100000", "--threads"},
      {"bench --threads 2000", "--threads"},
      {"bench --threads 2147483647", "--threads"},
      {"bench --batch 1000000 --context 1000000", "--batch 1000000 x --context 1000000"},
      {"bench --read-buffer-mb 1000000", "--read-buffer-mb 1000000"},
      {"bench --query-len 1000000000 --context 1000000000", "bytes of memory"},
      {"bench --heads 32abc/8xyz", "--heads '32abc/8xyz' must be Q/KV"},
      {"bench --heads 32/8/2", "--heads '32/8/2' must be Q/KV"},
      {"bench --warmup -5", "--warmup"},
      {"run --quiet --requests 2000000000", "--requests"},
      {"run --quiet --tolerance -1", "--tolerance"},
      {"run --quiet --tolerance nan", "--tolerance"},
      {"run --quiet --tolerance -inf", "--tolerance"},
      {"run --quiet --tolerance inf", "--tolerance"},
      {"run --quiet --seed 99999999999999999999999", "--seed"},
      {"run --quiet --block-size 0", "--block-size"},
      {"run --quiet --arrival-interval 2000000000", "arrival interval 2000000000 x 8 requests"},
      {"run --quiet --kv-cache-memory 99999999999999999999GiB", "'99999999999999999999GiB'"},
      {"run --quiet --prompt-len 1000000", "its 1000015 tokens (prompt 1000000 + output 16)"},
      {"run --quiet --prompt-len 1000000 --num-blocks 2000", "but only 1999 are usable"},
      {"--plugin '' backends", "the path is empty"},
      {"conformance --backend REFERENCE --seed 99999999999999999999", "--seed"},
  };
  for (const BadInput& c : cases) expect_clear_error(c);
}

// The numeric flags of every command. Values a flag accepts (and runs quickly with) are
// listed per flag and must succeed.
struct NumericFlag {
  std::string command;  // the subcommand and the flags that keep a run short
  std::string flag;
  std::vector<std::string> accepted;
};

// `command` less `flag` and its value, so the flag under test is given once.
std::string without(const std::string& command, const std::string& flag) {
  const size_t at = command.find(" " + flag + " ");
  if (at == std::string::npos) return command;
  const size_t value_end = command.find(' ', at + flag.size() + 2);
  return command.substr(0, at) + (value_end == std::string::npos ? "" : command.substr(value_end));
}

TEST(CliExtremes, EveryNumericFlagRefusesOutOfRangeValuesByName) {
  const std::string bench = "bench --repeats 1 --warmup 0 --read-buffer-mb 16 --context 64";
  const std::string run =
      "run --quiet --requests 2 --prompt-len 8 --output-len 2 --max-layers-per-kind 1";
  const std::vector<NumericFlag> flags = {
      {bench, "--head-size", {}},
      {bench, "--batch", {}},
      {bench, "--context", {}},
      {bench, "--query-len", {}},
      {bench, "--block-size", {}},
      {bench, "--threads", {"0"}},
      {bench, "--repeats", {}},
      {bench, "--warmup", {"0"}},
      {bench, "--read-buffer-mb", {}},
      {run, "--requests", {}},
      {run, "--output-len", {}},
      {run, "--arrival-interval", {"0", "2147483647"}},
      {run, "--max-batch-tokens", {}},
      {run, "--max-num-seqs", {}},
      {run, "--num-blocks", {}},
      {run, "--block-size", {}},
      {run, "--seed", {"0", "2147483647", "2147483648"}},
      {run, "--verify-samples", {"0"}},
      {run, "--tolerance", {"2147483647", "2147483648", "99999999999999999999"}},
      {run, "--max-layers-per-kind", {"0"}},
      {run, "--window-cap", {"0"}},
      {"explain --model gemma-3-1b-it", "--block-size", {}},
      {"conformance --backend REFERENCE --list", "--seed", {"0", "2147483647", "2147483648"}},
  };
  const std::vector<std::string> values = {
      "0", "-1", "2147483647", "2147483648", "99999999999999999999", "abc"};
  for (const NumericFlag& f : flags) {
    for (const std::string& value : values) {
      const std::string args = without(f.command, f.flag) + " " + f.flag + " " + value;
      const bool accepted =
          std::find(f.accepted.begin(), f.accepted.end(), value) != f.accepted.end();
      const testing::CliResult r = run_bounded(args);
      if (accepted) {
        EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.err;
        continue;
      }
      // 2147483647 is in range for a few flags, whose own checks then refuse the run
      // (naming what it would cost rather than the flag).
      EXPECT_GE(r.exit_code, 1) << args << "\n" << r.err;
      EXPECT_LE(r.exit_code, 127) << args << " ended by a signal or timed out\n" << r.err;
      EXPECT_NE(r.exit_code, 124) << args << " timed out";
      if (value != "2147483647") {
        EXPECT_THAT(r.err, HasSubstr(f.flag)) << args;
      }
    }
  }
}

}  // namespace
}  // namespace attnkit
