#include "attnkit/selector/startup_plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <utility>

#include "attnkit/core/error.h"
#include "attnkit/kv_cache/spec_factory.h"
#include "attnkit/selector/layer_config.h"

namespace attnkit {
namespace {

[[noreturn]] void rethrow_for_layer(const Error& e, const LayerSpec& layer) {
  throw Error(e.code(), fmt::format("Layer {} ({}, {}): {}", layer.index, layer.name,
                                    describe_kind(layer), e.what()));
}

}  // namespace

std::vector<std::string> unmatched_kind_warnings(const AttentionConfig& config,
                                                 const StartupPlan& plan) {
  std::vector<KvCacheKind> present;
  for (const LayerPlan& p : plan.layers) {
    const KvCacheKind kind = kind_of(p.config);
    if (std::find(present.begin(), present.end(), kind) == present.end()) present.push_back(kind);
  }
  std::sort(present.begin(), present.end(),
            [](KvCacheKind a, KvCacheKind b) { return to_string(a) < to_string(b); });
  std::vector<std::string> names;
  names.reserve(present.size());
  for (KvCacheKind k : present) names.emplace_back(to_string(k));
  std::vector<std::string> warnings;
  for (const auto& [kind, backend] : config.backend_per_kind) {
    if (std::find(present.begin(), present.end(), kind) != present.end()) continue;
    warnings.push_back(fmt::format(
        "backend_per_kind: '{}' (-> {}) matches no layer of this model, so it has no effect; "
        "the model's kinds are: {}",
        to_string(kind), backend,
        names.empty() ? std::string("(none)") : fmt::format("{}", fmt::join(names, ", "))));
  }
  return warnings;
}

StartupPlan plan_startup(const ModelDescription& model, const StartupRequest& request,
                         const Platform& platform, const Selector& selector) {
  StartupPlan plan;
  std::vector<LayerKvInput> kv_inputs;
  for (const LayerSpec& layer : model.layers) {
    if (!layer.needs_backend()) continue;
    LayerPlan planned;
    planned.layer = layer;
    try {
      planned.config =
          selector_config(layer, request.dtype, request.kv_cache_dtype, request.block_size);
      // One selection per distinct configuration: layers that ask the same question share
      // the answer.
      const auto same =
          std::find_if(plan.layers.begin(), plan.layers.end(),
                       [&](const LayerPlan& p) { return p.config == planned.config; });
      planned.selection =
          same != plan.layers.end() ? same->selection : selector.select(planned.config, platform);
      planned.kv_spec = spec_for_layer(planned.config, model.max_encoder_len);
    } catch (const Error& e) {
      rethrow_for_layer(e, layer);
    }
    kv_inputs.push_back({layer.index, planned.kv_spec, planned.selection->chosen.get()});
    plan.layers.push_back(std::move(planned));
  }
  plan.kv_cache = plan_kv_cache(kv_inputs, request.block_size);
  plan.warnings = unmatched_kind_warnings(selector.attention_config(), plan);
  return plan;
}

}  // namespace attnkit
