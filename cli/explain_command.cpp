// attnkit explain --model PATH|NAME [--platform P] [--dtype D] [--kv-cache-dtype D]
//   [--block-size N] [--attention-backend NAME] [--attention-config JSON|@FILE] [--json]
// Every layer of a model, its kind, the backend chosen for it and why, and the KV cache
// those choices shape. The work is done by attnkit/explain/explain.h; this file only reads
// the flags and prints.
#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "attnkit/core/error.h"
#include "attnkit/explain/explain.h"
#include "attnkit/model/model_loader.h"
#include "commands.h"
#include "common_options.h"

namespace attnkit::cli {
namespace {

struct ExplainOptions {
  std::string model;
  std::string platform;
  std::string dtype;
  std::string kv_cache_dtype = "auto";
  std::optional<int> block_size;
  std::string attention_backend;
  std::string attention_config;
  PhaseBackendFlags phase_backends;
  std::string tuning_cache;
  bool json = false;
};

// --attention-backend is the config's global "backend" given on its own; both at once,
// or either with ATTNKIT_ATTENTION_BACKEND, is ambiguous.
AttentionConfig resolve_attention(const ExplainOptions& o) {
  AttentionConfig config =
      apply_phase_backend_flags(load_attention_config(o.attention_config), o.phase_backends);
  if (o.attention_backend.empty()) return config;
  if (config.backend_source == BackendSource::kConfig) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--attention-backend {} and the attention config's \"backend\" ({}) "
                            "are mutually exclusive; give one of them",
                            o.attention_backend, config.backend));
  }
  if (config.backend_source == BackendSource::kEnv) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("--attention-backend {} and {}={} are mutually exclusive; unset "
                            "one of them",
                            o.attention_backend, kAttentionBackendEnvVar, config.backend));
  }
  // Read as the config key would be ("auto", "tuned" or a backend name).
  const AttentionConfig given =
      parse_attention_config(nlohmann::json{{"backend", o.attention_backend}}.dump());
  config.backend = given.backend;
  config.backend_source =
      given.backend == kAutoBackend ? BackendSource::kDefault : BackendSource::kConfig;
  return config;
}

void run_explain(const ExplainOptions& o) {
  // The selector also logs its warnings; they are part of the report already. main() sends
  // logging to stderr, so stdout carries nothing but the report (--json is read by scripts).
  ExplainRequest request;
  request.platform = resolve_platform(o.platform);
  if (!o.dtype.empty()) request.dtype = parse<DType>(o.dtype);
  request.kv_cache_dtype = parse<KvCacheDType>(o.kv_cache_dtype);
  request.block_size = o.block_size;  // 1 .. kMaxBlockSizeFlag, checked by CLI11
  request.attention = resolve_attention(o);
  request.tuning_cache = o.tuning_cache;
  const ModelDescription model = load_model(o.model);
  const Explanation explanation = explain(model, request);
  if (o.json) {
    print_json(to_json(explanation));
  } else {
    std::cout << to_text(explanation);
  }
}

}  // namespace

void add_explain_command(CLI::App& app) {
  auto options = std::make_shared<ExplainOptions>();
  CLI::App* cmd = app.add_subcommand(
      "explain",
      "Every layer of a model, its kind and the backend chosen for it (and why), and the "
      "KV-cache groups those choices shape");
  cmd->add_option("--model", options->model,
                  fmt::format("A Hugging Face config.json (or a folder holding one), or an "
                              "embedded model: {}",
                              fmt::join(embedded_model_names(), ", ")))
      ->required();
  add_platform_option(*cmd, options->platform);
  cmd->add_option("--dtype", options->dtype,
                  fmt::format("Compute dtype ({}); default: the model's torch_dtype, else "
                              "bfloat16",
                              valid_spellings<DType>()));
  cmd->add_option("--kv-cache-dtype", options->kv_cache_dtype,
                  fmt::format("KV-cache dtype ({}); auto = the compute dtype",
                              valid_spellings<KvCacheDType>()))
      ->capture_default_str();
  cmd->add_option("--block-size", options->block_size,
                  "Cache block size in tokens for every group; default: chosen per group from "
                  "its backends")
      ->check(CLI::Range(1, kMaxBlockSizeFlag));
  cmd->add_option("--attention-backend", options->attention_backend,
                  "Backend for every layer (the attention config's \"backend\"), auto or tuned");
  add_phase_backend_options(*cmd, options->phase_backends);
  add_tuning_cache_option(*cmd, options->tuning_cache);
  add_attention_config_option(*cmd, options->attention_config)
      ->description(
          "Attention config: JSON text starting with '{', or a JSON file (FILE or @FILE); keys: "
          "backend, backend_per_kind, override_mode, prefill_backend, decode_backend");
  add_json_flag(*cmd, options->json);
  cmd->callback([options] { run_explain(*options); });
}

}  // namespace attnkit::cli
