// attnkit run: drives real steps of a model's attention layers through the selected
// backends over a paged KV cache (runtime/model_runner.h), with synthetic inputs that
// --verify checks against dense attention.
#include <fmt/format.h>
#include <unistd.h>

#include <cctype>
#include <charconv>
#include <cstdio>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>

#include "attnkit/core/error.h"
#include "attnkit/model/model_limits.h"
#include "attnkit/model/model_loader.h"
#include "attnkit/runtime/backend_timer.h"
#include "attnkit/runtime/model_runner.h"
#include "attnkit/selector/selector.h"
#include "commands.h"
#include "common_options.h"

namespace attnkit::cli {
namespace {

struct RunOptions {
  std::string model = "gemma-3-1b-it";
  PhaseBackendFlags phase_backends;
  std::string tuning_cache;
  std::string platform;
  int requests = 8;
  std::string prompt_len = "32:128";
  int output_len = 16;
  std::string encoder_len = "32:96";
  int arrival_interval = 0;
  int max_batch_tokens = 256;
  int max_num_seqs = 64;
  int num_blocks = 0;
  std::string kv_cache_memory = "256MiB";
  int block_size = 0;
  std::string dtype;
  std::string kv_cache_dtype = "auto";
  uint64_t seed = 0;
  bool verify = false;
  std::string checked;  // "", "on" or "off"
  int verify_samples = 4;
  double tolerance = 0.0;
  std::string attention_config;
  int max_layers_per_kind = 0;
  int window_cap = 0;
  bool json = false;
  bool quiet = false;
};

// "256MiB", "1GiB", "512MB", "4096" (bytes) -> bytes.
size_t parse_memory_size(const std::string& text) {
  const auto bad = [&] {
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("--kv-cache-memory '{}' is not a size: expected a number of bytes "
                             "with an optional unit (B, KB, MB, GB, KiB, MiB, GiB), e.g. 256MiB",
                             text));
  };
  size_t pos = 0;
  while (pos < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[pos])) || text[pos] == '.'))
    ++pos;
  if (pos == 0) throw bad();
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + pos, value);
  if (ec != std::errc() || end != text.data() + pos || value <= 0) throw bad();
  std::string unit = text.substr(pos);
  for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  double scale = 0;
  if (unit.empty() || unit == "b")
    scale = 1;
  else if (unit == "kb" || unit == "k")
    scale = 1e3;
  else if (unit == "mb" || unit == "m")
    scale = 1e6;
  else if (unit == "gb" || unit == "g")
    scale = 1e9;
  else if (unit == "kib")
    scale = 1024.0;
  else if (unit == "mib")
    scale = 1024.0 * 1024;
  else if (unit == "gib")
    scale = 1024.0 * 1024 * 1024;
  else
    throw bad();
  const double bytes = value * scale;
  // 2^63 bytes: beyond any machine, and what a size_t holds on every platform with room.
  constexpr double kMaxBytes = 9223372036854775808.0;
  if (!(bytes < kMaxBytes)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--kv-cache-memory '{}' is {:.3g} bytes, more than the {:.3g} bytes "
                            "it may ask for",
                            text, bytes, kMaxBytes));
  }
  return static_cast<size_t>(bytes);
}

// A progress bar on a terminal (redrawn in place), plain lines otherwise (every quarter of
// the requests), both on stderr so stdout stays the report.
class Progress {
 public:
  explicit Progress(bool enabled) : enabled_(enabled), tty_(isatty(fileno(stderr)) != 0) {}

  void update(const StepProgress& p) {
    if (!enabled_) return;
    if (tty_) {
      constexpr int kWidth = 30;
      const double frac = p.tokens_total > 0
                              ? std::min(1.0, static_cast<double>(p.tokens_done) /
                                                  static_cast<double>(p.tokens_total))
                              : 1.0;
      const int filled = static_cast<int>(frac * kWidth);
      std::fprintf(stderr, "\r[%s%s] %3d%%  %d/%d requests  %ld tokens  step %ld",
                   std::string(static_cast<size_t>(filled), '#').c_str(),
                   std::string(static_cast<size_t>(kWidth - filled), '.').c_str(),
                   static_cast<int>(frac * 100), p.requests_finished, p.requests_total,
                   p.tokens_done, p.step);
      std::fflush(stderr);
      drawn_ = true;
      return;
    }
    const int quarter = p.requests_total > 0 ? 4 * p.requests_finished / p.requests_total : 4;
    if (quarter > last_quarter_) {
      last_quarter_ = quarter;
      std::fprintf(stderr, "progress: %d/%d requests finished, %ld tokens, %d steps\n",
                   p.requests_finished, p.requests_total, p.tokens_done, p.steps_run);
    }
  }
  void finish() {
    if (drawn_) std::fprintf(stderr, "\n");
  }

 private:
  bool enabled_;
  bool tty_;
  bool drawn_ = false;
  int last_quarter_ = 0;
};

void run(const RunOptions& o, const CLI::App& command) {
  const ModelDescription model = load_model(o.model);
  // The runner executes on this machine's CPU; --platform names it explicitly or asks for
  // another one (which the runner rejects with its reason).
  const Platform platform = o.platform.empty() ? cpu_platform() : parse_platform(o.platform);
  const AttentionConfig attention =
      apply_phase_backend_flags(load_attention_config(o.attention_config), o.phase_backends);
  // A "tuned" choice measures what the tuning cache lacks on first use, and saves it.
  const Selector selector(attention, global_registry(), make_measuring_tuning(o.tuning_cache));

  RunnerOptions ro;
  if (!o.dtype.empty()) ro.dtype = parse<DType>(o.dtype);
  ro.kv_cache_dtype = parse<KvCacheDType>(o.kv_cache_dtype);
  if (command.count("--block-size") > 0) ro.block_size = o.block_size;
  if (command.count("--num-blocks") > 0 && o.num_blocks < 2) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--num-blocks {} must be at least 2 (block 0 is the null block)",
                            o.num_blocks));
  }
  ro.num_blocks = o.num_blocks;
  ro.kv_cache_memory = parse_memory_size(o.kv_cache_memory);
  ro.scheduler.max_batch_tokens = o.max_batch_tokens;
  ro.scheduler.max_num_seqs = o.max_num_seqs;
  ro.seed = o.seed;
  ro.verify.enabled = o.verify;
  if (!o.checked.empty()) ro.checked = o.checked == "on";
  ro.verify.samples_per_layer_step = o.verify_samples;
  ro.verify.tolerance = o.tolerance;
  ro.max_layers_per_kind = o.max_layers_per_kind;
  ro.window_cap = o.window_cap;
  Progress progress(!o.quiet);
  ro.on_step = [&](const StepProgress& p) { progress.update(p); };

  ModelRunner runner(model, platform, selector, ro);

  WorkloadOptions w;
  w.num_requests = o.requests;
  std::tie(w.min_prompt_len, w.max_prompt_len) = parse_length_range(o.prompt_len, "--prompt-len");
  w.output_len = o.output_len;
  w.arrival_interval = o.arrival_interval;
  if (runner.is_encoder_decoder()) {
    std::tie(w.min_encoder_len, w.max_encoder_len) =
        parse_length_range(o.encoder_len, "--encoder-len");
  }
  w.seed = o.seed;
  const std::vector<RequestSpec> requests = make_workload(w);

  if (!o.json) {
    std::cout << fmt::format(
        "attnkit run: {} on {} — {} attention layers in {} KV-cache "
        "groups, {} usable blocks\n",
        runner.model().name, platform.to_string(), runner.layers().size(),
        runner.kv_config().groups.size(), runner.num_usable_blocks());
    std::cout << "Selection (planned backend per KV-cache group):\n" << runner.selection_summary();
    std::cout << std::flush;
  }
  const RunReport report = runner.run(requests);
  progress.finish();
  if (o.json) {
    print_json(to_json(report));
  } else {
    std::cout << to_text(report);
  }
  if (report.verify && !report.verify->passed) {
    throw Error(ErrorCode::kInternal,
                fmt::format("verification failed: max relative error {:.3g} exceeds the "
                            "tolerance {:.3g}",
                            report.verify->max_rel_error, report.verify->tolerance));
  }
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto options = std::make_shared<RunOptions>();
  CLI::App* cmd = app.add_subcommand(
      "run",
      "Run requests through a model's attention layers with the selected backends over a "
      "paged KV cache: continuous batching, chunked prefill, preemption; prints throughput, "
      "the backends that really ran per KV-cache group, KV blocks used and (with --verify) "
      "the error against dense attention");
  RunOptions& o = *options;
  cmd->add_option("--model", o.model,
                  "Model: an embedded name (e.g. gemma-3-1b-it), a config.json, or a folder "
                  "holding one")
      ->capture_default_str();
  add_platform_option(*cmd, o.platform);
  cmd->add_option("--requests", o.requests, "Number of requests")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxWorkloadRequests));
  cmd->add_option("--prompt-len", o.prompt_len, "Prompt lengths MIN:MAX (uniform per request) or N")
      ->capture_default_str();
  cmd->add_option("--output-len", o.output_len, "Tokens each request generates")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxRequestTokens));
  cmd->add_option("--encoder-len", o.encoder_len,
                  "Encoder-decoder models: encoder input lengths MIN:MAX or N")
      ->capture_default_str();
  cmd->add_option("--arrival-interval", o.arrival_interval,
                  "Steps between request arrivals (0 = all arrive at once)")
      ->capture_default_str()
      ->check(CLI::Range(0, std::numeric_limits<int>::max()));
  cmd->add_option("--max-batch-tokens", o.max_batch_tokens,
                  "Token budget of one step (prefill chunks + decodes)")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxRequestTokens));
  cmd->add_option("--max-num-seqs", o.max_num_seqs, "Requests in one step at most")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxWorkloadRequests));
  auto* blocks = cmd->add_option("--num-blocks", o.num_blocks,
                                 "KV-cache blocks in the pool, the null block included")
                     ->check(CLI::Range(2, kMaxNumBlocksFlag));
  auto* memory = cmd->add_option("--kv-cache-memory", o.kv_cache_memory,
                                 "KV-cache memory (e.g. 256MiB, 1GiB); sets the block count")
                     ->capture_default_str();
  blocks->excludes(memory);
  cmd->add_option("--block-size", o.block_size,
                  "Cache block size in tokens (default: from the chosen backends)")
      ->check(CLI::Range(1, kMaxBlockSizeFlag));
  cmd->add_option("--dtype", o.dtype,
                  "Compute dtype: float32, float16 or bfloat16 (default: the model's)");
  cmd->add_option("--kv-cache-dtype", o.kv_cache_dtype,
                  "KV-cache dtype: auto, float16, bfloat16, float32, fp8_e4m3, fp8_e5m2")
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of the workload and the synthetic Q/K/V")
      ->capture_default_str()
      ->check(seed_text());
  cmd->add_flag("--verify", o.verify,
                "Recompute outputs with dense attention over each request's full history and "
                "report the max relative error per layer kind (fails above the tolerance)");
  cmd->add_option("--checked", o.checked,
                  "Checked mode of every forward call: on (verify metadata before the kernels, "
                  "fail on non-finite outputs naming the request) or off (default: "
                  "ATTNKIT_CHECKED, else on in debug builds)")
      ->check(CLI::IsMember({"on", "off"}));
  cmd->add_option("--verify-samples", o.verify_samples,
                  "Output rows verified per layer per step (0 = every row)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--tolerance", o.tolerance,
                  "Verification tolerance (default: by dtype, 1e-3 fp32, 5e-3 fp16, 2e-2 bf16)")
      ->check(positive_finite_number());
  add_attention_config_option(*cmd, o.attention_config);
  add_phase_backend_options(*cmd, o.phase_backends);
  add_tuning_cache_option(*cmd, o.tuning_cache);
  cmd->add_option("--max-layers-per-kind", o.max_layers_per_kind,
                  "Quick runs: keep at most N layers of each attention kind (0 = all)")
      ->capture_default_str()
      ->check(CLI::Range(0, kMaxModelLayers));
  cmd->add_option("--window-cap", o.window_cap,
                  "Quick runs: cap sliding windows and chunk sizes at N tokens (0 = as "
                  "configured)")
      ->capture_default_str()
      ->check(CLI::Range(0, kMaxModelContext));
  add_json_flag(*cmd, o.json);
  cmd->add_flag("--quiet", o.quiet, "No progress output");
  cmd->callback([options, cmd] { run(*options, *cmd); });
}

}  // namespace attnkit::cli
