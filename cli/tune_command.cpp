// attnkit tune: times every valid backend of each distinct attention layer of a model on
// this device (the shape buckets of selector/tuning.h) and stores the times in the tuning
// cache, where "tuned" choices find them.
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "attnkit/core/json_schema.h"
#include "attnkit/model/model_loader.h"
#include "attnkit/runtime/backend_timer.h"
#include "attnkit/selector/selection_report.h"
#include "attnkit/selector/startup_plan.h"
#include "commands.h"
#include "common_options.h"

namespace attnkit::cli {
namespace {

struct TuneOptions {
  std::string model;
  std::string platform;
  std::string dtype;
  std::string kv_cache_dtype = "auto";
  std::string tuning_cache;
  int repeats = 5;
  bool json = false;
};

void run_tune(const TuneOptions& o) {
  const ModelDescription model = load_model(o.model);
  const Platform platform = resolve_platform(o.platform);
  if (!platform.is_local) {
    throw Error(ErrorCode::kUnsupported,
                fmt::format("platform {} is only described: tuning times this machine's "
                            "devices (use --platform cpu or a local GPU)",
                            platform.to_string()));
  }
  AttentionConfig attention;
  attention.backend = std::string(kTunedBackend);
  attention.backend_source = BackendSource::kConfig;
  TimerOptions timer;
  timer.repeats = o.repeats;
  const auto tuning = make_measuring_tuning(o.tuning_cache, timer);
  const Selector selector(attention, global_registry(), tuning);
  StartupRequest request;
  request.dtype = resolve_model_dtype(
      o.dtype.empty() ? std::nullopt : std::optional<DType>(parse<DType>(o.dtype)), model,
      platform);
  request.kv_cache_dtype = parse<KvCacheDType>(o.kv_cache_dtype);
  const StartupPlan plan = plan_startup(model, request, platform, selector);

  std::set<const SelectionResult*> seen;
  nlohmann::json layers = nlohmann::json::array();
  std::string text = fmt::format("Tuned {} on {} (cache {}):\n", model.name, platform.to_string(),
                                 tuning->cache_path());
  for (const LayerPlan& layer : plan.layers) {
    if (!seen.insert(layer.selection.get()).second) continue;
    text += fmt::format("  layer {} ({}):\n{}", layer.layer.index, layer.layer.name,
                        to_text(*layer.selection, "    "));
    layers.push_back(
        {{"first_layer", layer.layer.index}, {"selection", to_json(*layer.selection)}});
  }
  if (o.json) {
    print_json({{"schema_version", kJsonSchemaVersion},
                {"model", model.name},
                {"platform", platform.to_string()},
                {"tuning_cache", tuning->cache_path()},
                {"configurations", layers}});
  } else {
    std::cout << text;
  }
}

}  // namespace

void add_tune_command(CLI::App& app) {
  auto options = std::make_shared<TuneOptions>();
  CLI::App* cmd = app.add_subcommand(
      "tune",
      "Time every valid backend of each distinct attention layer of a model on this device and "
      "store the times for \"backend\": \"tuned\"");
  cmd->add_option("--model", options->model,
                  "A Hugging Face config.json (or a folder holding one), or an embedded model")
      ->required();
  add_platform_option(*cmd, options->platform);
  cmd->add_option("--dtype", options->dtype,
                  "Compute dtype (bfloat16, float16, float32); default: the model's");
  cmd->add_option("--kv-cache-dtype", options->kv_cache_dtype,
                  fmt::format("KV-cache dtype ({})", valid_spellings<KvCacheDType>()))
      ->capture_default_str();
  cmd->add_option("--repeats", options->repeats,
                  "Timed forward calls per backend and shape bucket (the median is kept)")
      ->capture_default_str()
      ->check(CLI::Range(1, kMaxRepeatsFlag));
  add_tuning_cache_option(*cmd, options->tuning_cache);
  add_json_flag(*cmd, options->json);
  cmd->callback([options] { run_tune(*options); });
}

}  // namespace attnkit::cli
