#include "attnkit/explain/explain.h"

#include <fmt/format.h>

#include <algorithm>

#include "attnkit/core/error.h"
#include "attnkit/core/options.h"
#include "attnkit/selector/startup_plan.h"

namespace attnkit {
namespace {

void add_distinct(std::vector<std::string>& list, const std::string& item) {
  if (std::find(list.begin(), list.end(), item) == list.end()) list.push_back(item);
}

}  // namespace

Explanation explain(const ModelDescription& model, const ExplainRequest& request,
                    const BackendRegistry& registry) {
  Explanation out;
  out.model = model;
  out.platform = request.platform;
  out.dtype = resolve_model_dtype(request.dtype, model, request.platform);
  if (!request.dtype && model.dtype == DType::kFloat32) {
    out.notes.push_back(
        fmt::format("the checkpoint is float32; it runs in {} (auto dtype, as "
                    "vLLM's); --dtype float32 keeps float32",
                    to_string(out.dtype)));
  }
  out.kv_cache_dtype = request.kv_cache_dtype;
  out.block_size = request.block_size;
  out.attention = request.attention;
  for (const std::string& w : model.warnings) add_distinct(out.warnings, w);

  // 1. The start-up plan `attnkit run` makes: selection per layer, then the KV cache.
  const Selector selector(
      request.attention, registry,
      std::make_shared<const Tuning>(request.tuning_cache.empty() ? default_tuning_cache_path()
                                                                  : request.tuning_cache));
  StartupPlan plan = plan_startup(model, {out.dtype, out.kv_cache_dtype, request.block_size},
                                  request.platform, selector);
  for (const std::string& w : plan.warnings) add_distinct(out.warnings, w);
  size_t next = 0;  // plan.layers holds the attention layers in model order
  for (const LayerSpec& layer : model.layers) {
    LayerOutcome outcome;
    outcome.layer = layer;
    if (layer.needs_backend()) {
      outcome.selection = plan.layers.at(next++).selection;
      for (const std::string& w : outcome.selection->warnings) add_distinct(out.warnings, w);
      if (!outcome.selection->runnable) {
        out.runnable = false;
        add_distinct(out.notes, fmt::format("{} on {}: {}", outcome.selection->backend,
                                            request.platform.to_string(),
                                            outcome.selection->binary_reason.value_or("")));
      }
    }
    out.layers.push_back(std::move(outcome));
  }

  for (const LayerOutcome& outcome : out.layers) {
    if (outcome.selection == nullptr) continue;
    const std::string& name = outcome.selection->backend;
    if (out.kernel_variants.count(name) == 0) {
      out.kernel_variants[name] = kernel_variant(name, request.platform);
    }
    out.cuda_graphs[name] = to_string(outcome.selection->chosen->capabilities().cuda_graphs);
  }
  for (const OptionInfo& info : all_options()) {
    if (const std::optional<std::string> value = option_text(info.option)) {
      out.options[std::string(info.name)] = *value;
    }
  }

  // 2. The KV cache those choices shape.
  out.kv_cache = std::move(plan.kv_cache);
  for (const KvCacheGroup& group : out.kv_cache.groups) {
    for (int index : group.layer_indices) {
      out.layers.at(static_cast<size_t>(index)).kv_cache_group = group.group_id;
    }
  }
  return out;
}

std::string format_layer_list(const std::vector<int>& layers) {
  // Runs of consecutive indices, [first, last].
  std::vector<std::pair<int, int>> runs;
  for (size_t i = 0; i < layers.size();) {
    size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
    runs.emplace_back(layers[i], layers[j]);
    i = j + 1;
  }
  auto text = [](const std::pair<int, int>& r) {
    return r.first == r.second ? fmt::format("{}", r.first)
                               : fmt::format("{}-{}", r.first, r.second);
  };
  // A regular pattern (equal runs at equal spacing; the last may be cut short by the end
  // of the model) of many runs reads better as its first two runs and its last.
  constexpr size_t kElideFrom = 6;
  if (runs.size() >= kElideFrom) {
    const int length = runs[0].second - runs[0].first;
    const int step = runs[1].first - runs[0].first;
    bool regular = true;
    for (size_t i = 1; i < runs.size() && regular; ++i) {
      const bool last = i + 1 == runs.size();
      const int len = runs[i].second - runs[i].first;
      regular = runs[i].first - runs[i - 1].first == step && (last ? len <= length : len == length);
    }
    if (regular) {
      return fmt::format("{}, {}, ..., {}", text(runs[0]), text(runs[1]), text(runs.back()));
    }
  }
  std::string out;
  for (const auto& r : runs) {
    if (!out.empty()) out += ", ";
    out += text(r);
  }
  return out;
}

}  // namespace attnkit
