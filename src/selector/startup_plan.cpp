#include "attnkit/selector/startup_plan.h"

#include <fmt/format.h>

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

StartupPlan plan_startup(const ModelDescription& model, const StartupRequest& request,
                         const Platform& platform, const Selector& selector) {
  StartupPlan plan;
  std::vector<LayerKvInput> kv_inputs;
  for (const LayerSpec& layer : model.layers) {
    if (!layer.is_attention) continue;
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
  return plan;
}

}  // namespace attnkit
