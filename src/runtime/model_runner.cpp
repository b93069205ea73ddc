#include "attnkit/runtime/model_runner.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "attnkit/backend/forward_check.h"
#include "attnkit/core/error.h"
#include "attnkit/kv_cache/spec_factory.h"
#include "attnkit/selector/layer_config.h"
#include "attnkit/selector/startup_plan.h"
#include "runtime/runner_impl.h"
#include "runtime/startup_checks.h"

namespace attnkit {

ModelDescription reduce_model(const ModelDescription& model, int max_layers_per_kind,
                              int window_cap, std::vector<std::string>* notes) {
  ModelDescription out = model;
  out.layers.clear();
  std::map<std::pair<AttentionType, KvCacheKind>, int> kept;
  int dropped = 0, capped = 0;
  for (LayerSpec layer : model.layers) {
    if (layer.needs_backend() && max_layers_per_kind > 0) {
      int& n = kept[{layer.attn_type, layer.kind}];
      if (n >= max_layers_per_kind) {
        ++dropped;
        continue;
      }
      ++n;
    }
    if (layer.is_attention && window_cap > 0) {
      if (layer.sliding_window && *layer.sliding_window > window_cap) {
        layer.sliding_window = window_cap;
        ++capped;
      }
      if (layer.chunk_size && *layer.chunk_size > window_cap) {
        layer.chunk_size = window_cap;
        ++capped;
      }
    }
    layer.index = static_cast<int>(out.layers.size());
    out.layers.push_back(std::move(layer));
  }
  if (notes && dropped > 0) {
    notes->push_back(fmt::format(
        "reduced model: at most {} layers per kind ({} of {} attention and state layers kept)",
        max_layers_per_kind, model.num_attention_layers() + model.num_state_layers() - dropped,
        model.num_attention_layers() + model.num_state_layers()));
  }
  if (notes && capped > 0) {
    notes->push_back(
        fmt::format("reduced model: sliding windows and chunks capped at {} tokens "
                    "({} layers)",
                    window_cap, capped));
  }
  return out;
}

void ModelRunner::Impl::select_and_plan(const Selector& selector) {
  // 1. The start-up plan `attnkit explain` reports: selection per layer, the KV cache.
  StartupPlan plan =
      plan_startup(model, {dtype, options.kv_cache_dtype, options.block_size}, platform, selector);
  require_runnable(plan, model.name);
  warnings = plan.warnings;
  for (LayerPlan& layer_plan : plan.layers) {
    const LayerSpec& spec = layer_plan.layer;
    Layer layer;
    layer.spec = spec;
    layer.selection = layer_plan.selection;
    layer.backend = layer.selection->chosen;
    layer.params = layer_params(spec, dtype, options.kv_cache_dtype);
    layer.params.layer_index = spec.index;
    layer.params.checked = options.checked.has_value() ? *options.checked : checked_mode_default();
    if (spec.has_sinks) layer.params.sinks = gen.sinks(spec.index, spec.num_heads);
    if (spec.state) layer.params.state_params = gen.state_params(spec.index, *spec.state);
    layer.kv_spec = layer_plan.kv_spec;
    layers.push_back(std::move(layer));
  }

  // 2. The KV cache, shaped by the chosen backends.
  kv_config = std::move(plan.kv_cache);
  num_blocks = pool_blocks(kv_config, options.num_blocks, options.kv_cache_memory,
                           "kv_cache_memory (--kv-cache-memory)");
  if (num_blocks < 2) {
    throw Error(
        ErrorCode::kInvalidArgument,
        fmt::format("--num-blocks {} must be at least 2 (block 0 is the null block)", num_blocks));
  }
  io = std::make_unique<DeviceIo>(platform.kind);
  storage = std::make_unique<KvCacheStorage>(kv_config, num_blocks, io->kv_allocator());

  // 3. Builders per group (per backend), implementations per layer.
  groups.resize(kv_config.groups.size());
  for (Layer& layer : layers) {
    const KvCacheGroup& group = kv_config.group_of_layer(layer.spec.index);
    layer.group = group.group_id;
    Group& g = groups[static_cast<size_t>(group.group_id)];
    g.encoder_pass = layer.encoder_pass();
    const std::string name(layer.backend->name());
    if (!g.builders.count(name)) {
      g.builders[name] = layer.backend->make_builder(group.spec, layer.params);
    }
    layer.impl = layer.backend->make_impl(layer.params);
    if (layer.selection->phases) splits_phases = true;
    planned.push_back({layer.spec.index, layer.spec.name, layer.spec.kind, layer.spec.attn_type,
                       layer.selection->backend, std::string(to_string(layer.selection->chosen_by)),
                       layer.group});
  }
  for (const Layer& layer : layers) {
    ATTNKIT_CHECK(groups[static_cast<size_t>(layer.group)].encoder_pass == layer.encoder_pass(),
                  "a KV-cache group mixes encoder and decoder layers");
  }
}

ModelRunner::ModelRunner(const ModelDescription& model, const Platform& platform,
                         const Selector& selector, RunnerOptions options) {
  if (!platform.is_local) {
    throw Error(ErrorCode::kUnsupported,
                fmt::format("platform {} is only described, not this machine's: attnkit run "
                            "executes real steps (use `attnkit explain --platform {}` to see "
                            "what would be selected there)",
                            platform.to_string(), platform.to_string()));
  }
  std::vector<std::string> notes;
  ModelDescription reduced =
      reduce_model(model, options.max_layers_per_kind, options.window_cap, &notes);
  impl_ = std::make_unique<Impl>(std::move(reduced), platform, std::move(options));
  impl_->notes = std::move(notes);
  impl_->select_and_plan(selector);
}

ModelRunner::~ModelRunner() = default;

const ModelDescription& ModelRunner::model() const { return impl_->model; }
const std::vector<PlannedLayer>& ModelRunner::layers() const { return impl_->planned; }
const KvCacheConfig& ModelRunner::kv_config() const { return impl_->kv_config; }

std::string ModelRunner::selection_summary() const {
  std::string out;
  for (const KvCacheGroup& g : impl_->kv_config.groups) {
    std::vector<std::string> chosen_by;
    for (const PlannedLayer& layer : impl_->planned) {
      if (layer.group == g.group_id &&
          std::find(chosen_by.begin(), chosen_by.end(), layer.chosen_by) == chosen_by.end()) {
        chosen_by.push_back(layer.chosen_by);
      }
    }
    std::string names, why;
    for (const std::string& n : g.backend_names()) names += (names.empty() ? "" : "+") + n;
    for (const std::string& w : chosen_by) why += (why.empty() ? "" : "+") + w;
    out += fmt::format("  group {}: {:<48} layers {:<14} -> {} ({})\n", g.group_id,
                       g.spec.describe(), format_layer_ranges(g.layer_indices), names, why);
  }
  return out;
}

int ModelRunner::num_usable_blocks() const { return impl_->num_blocks - 1; }
DType ModelRunner::dtype() const { return impl_->dtype; }
bool ModelRunner::is_encoder_decoder() const { return impl_->model.is_encoder_decoder; }
bool ModelRunner::is_encoder_only() const { return impl_->encoder_only(); }

RunReport ModelRunner::run(std::span<const RequestSpec> requests) { return impl_->run(requests); }

}  // namespace attnkit
