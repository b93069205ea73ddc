#include "attnkit/runtime/attention_stack.h"

#include <fmt/format.h>

#include <algorithm>
#include <iterator>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "attnkit/backend/state_params.h"
#include "attnkit/core/device_memory.h"
#include "attnkit/core/error.h"
#include "attnkit/kv_cache/kv_cache_manager.h"
#include "attnkit/kv_cache/kv_cache_storage.h"
#include "attnkit/runtime/backend_timer.h"
#include "attnkit/selector/layer_config.h"
#include "attnkit/selector/startup_plan.h"
#include "runtime/device_io.h"
#include "runtime/startup_checks.h"

namespace attnkit {

namespace {

int ceil_div(int a, int b) { return (a + b - 1) / b; }

void check_options(const AttentionStackOptions& o) {
  if (!o.platform.is_local) {
    throw Error(ErrorCode::kUnsupported,
                fmt::format("platform {} is only described, not this machine's: an attention "
                            "stack runs real steps (explain() tells what would be selected there)",
                            o.platform.to_string()));
  }
  const auto positive = [](int value, std::string_view field) {
    if (value <= 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("attention stack limits: {} must be positive, got {}", field, value));
    }
  };
  positive(o.limits.max_num_reqs, "max_num_reqs");
  positive(o.limits.max_num_tokens, "max_num_tokens");
  positive(o.limits.max_seq_len, "max_seq_len");
  if (o.num_blocks < 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("num_blocks must be at least 2 (block 0 is the null block), or 0 "
                            "to size the cache by kv_cache_bytes; got {}",
                            o.num_blocks));
  }
}

// The limits one group's builders are reserved for: its block-table width follows from the
// longest sequence it may hold (the encoder length for cross attention).
StepLimits group_limits(const StepLimits& limits, const KvCacheGroup& group) {
  StepLimits out = limits;
  const int longest = std::max(limits.max_seq_len, group.spec.max_encoder_len);
  out.max_seq_len = longest;
  out.max_blocks_per_req =
      group.kernel_block_size > 0 ? std::max(1, ceil_div(longest, group.kernel_block_size)) : 1;
  return out;
}

}  // namespace

struct AttentionStack::Impl {
  ModelDescription model;
  AttentionStackOptions options;
  DType dtype = DType::kBFloat16;
  Selector selector;
  KvCacheConfig kv_config;
  std::vector<StackLayer> layers;
  // Model layer index -> position in layers (-1: not an attention layer), so that
  // forward() finds its layer, implementation and plan by indexing alone.
  std::vector<int> layer_slot;
  std::vector<std::unique_ptr<AttentionImpl>> impls;  // parallel to layers
  std::vector<size_t> builder_of;  // parallel to layers: its builder in its group
  // Per group: one builder per backend that serves a layer of it, and its last plan
  // (parallel to builders).
  struct Group {
    std::vector<std::pair<std::string, std::unique_ptr<MetadataBuilder>>> builders;
    std::vector<const AttentionMetadata*> plans;
  };
  std::vector<Group> groups;
  std::shared_ptr<DeviceMemory> memory;  // null on the CPU
  std::unique_ptr<KvCacheManager> kv;
  std::unique_ptr<KvCacheStorage> storage;
  std::vector<CommonAttentionMetadata> step;  // the last planned step, per group
  Device device;

  Impl(const ModelDescription& m, const AttentionStackOptions& o)
      : model(m),
        options(o),
        dtype(resolve_model_dtype(o.dtype, m, o.platform)),
        selector(o.attention, o.registry != nullptr ? *o.registry : global_registry(),
                 o.tuning != nullptr ? o.tuning : make_measuring_tuning()) {}

  size_t slot_of(int layer_index) const {
    if (layer_index >= 0 && layer_index < static_cast<int>(layer_slot.size()) &&
        layer_slot[static_cast<size_t>(layer_index)] >= 0) {
      return static_cast<size_t>(layer_slot[static_cast<size_t>(layer_index)]);
    }
    std::vector<int> indices;
    for (const StackLayer& layer : layers) indices.push_back(layer.index);
    throw Error(ErrorCode::kNotFound,
                fmt::format("layer {} is not an attention layer of {}; its attention layers are "
                            "{}",
                            layer_index, model.name, fmt::join(indices, ", ")));
  }

  void check_batch(std::span<const StepRequest> batch) const {
    const StepLimits& limits = options.limits;
    if (batch.empty()) {
      throw Error(ErrorCode::kInvalidArgument, "plan_step: the batch holds no request");
    }
    if (static_cast<int>(batch.size()) > limits.max_num_reqs) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("plan_step: {} requests, beyond the stack's max_num_reqs {}",
                              batch.size(), limits.max_num_reqs));
    }
    long tokens = 0;
    std::unordered_set<RequestId> seen;
    for (const StepRequest& r : batch) {
      if (!seen.insert(r.id).second) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("plan_step: request {} appears twice in the batch", r.id));
      }
      if (r.num_computed_tokens < 0 || r.num_new_tokens < 0) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("plan_step: request {}: token counts must be non-negative, got "
                                "{} computed and {} new",
                                r.id, r.num_computed_tokens, r.num_new_tokens));
      }
      const long seq_len = long{r.num_computed_tokens} + r.num_new_tokens;
      if (seq_len > limits.max_seq_len) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("plan_step: request {} would hold {} tokens, beyond the stack's "
                                "max_seq_len {}",
                                r.id, seq_len, limits.max_seq_len));
      }
      tokens += r.num_new_tokens;
    }
    if (tokens > limits.max_num_tokens) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("plan_step: {} query tokens, beyond the stack's max_num_tokens {}",
                              tokens, limits.max_num_tokens));
    }
  }
};

AttentionStack::AttentionStack(const ModelDescription& model, const AttentionStackOptions& options)
    : impl_(std::make_unique<Impl>(model, options)) {
  check_options(options);
  Impl& s = *impl_;

  // 1. Selection for every attention layer and the KV cache it shapes (what explain says).
  StartupPlan plan = plan_startup(model, {s.dtype, options.kv_cache_dtype, options.block_size},
                                  options.platform, s.selector);
  require_runnable(plan, model.name);
  s.kv_config = std::move(plan.kv_cache);
  for (LayerPlan& layer_plan : plan.layers) {
    const LayerSpec& spec = layer_plan.layer;
    StackLayer layer;
    layer.index = spec.index;
    layer.name = spec.name;
    layer.group = s.kv_config.group_of_layer(spec.index).group_id;
    layer.params = layer_params(spec, s.dtype, options.kv_cache_dtype);
    layer.params.layer_index = spec.index;
    layer.params.checked = options.checked;
    layer.selection = layer_plan.selection;
    if (spec.index >= static_cast<int>(s.layer_slot.size())) {
      s.layer_slot.resize(static_cast<size_t>(spec.index) + 1, -1);
    }
    s.layer_slot[static_cast<size_t>(spec.index)] = static_cast<int>(s.layers.size());
    s.layers.push_back(std::move(layer));
  }

  // 2. The cache memory, on the platform's device, and its block pool.
  const bool cuda = options.platform.kind == PlatformKind::kCuda;
  std::shared_ptr<KvMemoryAllocator> allocator = std::make_shared<HostKvMemoryAllocator>();
  if (cuda) {
    s.memory = make_current_cuda_memory();
    allocator = make_kv_allocator(s.memory);
  }
  s.device = allocator->device();
  const int num_blocks =
      pool_blocks(s.kv_config, options.num_blocks, options.kv_cache_bytes, "kv_cache_bytes");
  s.kv = std::make_unique<KvCacheManager>(s.kv_config, num_blocks);
  s.storage = std::make_unique<KvCacheStorage>(s.kv_config, num_blocks, allocator);

  // 3. Builders per group and backend (reserved for the limits), implementations per layer.
  s.groups.resize(s.kv_config.groups.size());
  for (const StackLayer& layer : s.layers) {
    const KvCacheGroup& group = s.kv_config.groups[static_cast<size_t>(layer.group)];
    Impl::Group& g = s.groups[static_cast<size_t>(layer.group)];
    const std::string& backend = layer.selection->backend;
    const auto same = [&](const auto& entry) { return entry.first == backend; };
    auto it = std::find_if(g.builders.begin(), g.builders.end(), same);
    if (it == g.builders.end()) {
      std::unique_ptr<MetadataBuilder> builder =
          layer.selection->chosen->make_builder(group.spec, layer.params);
      builder->reserve(group_limits(options.limits, group));
      g.builders.emplace_back(backend, std::move(builder));
      g.plans.push_back(nullptr);
      it = std::prev(g.builders.end());
    }
    s.builder_of.push_back(static_cast<size_t>(it - g.builders.begin()));
    s.impls.push_back(layer.selection->chosen->make_impl(layer.params));
  }
}

AttentionStack::~AttentionStack() = default;
AttentionStack::AttentionStack(AttentionStack&&) noexcept = default;
AttentionStack& AttentionStack::operator=(AttentionStack&&) noexcept = default;

const ModelDescription& AttentionStack::model() const { return impl_->model; }
const AttentionStackOptions& AttentionStack::options() const { return impl_->options; }
const Platform& AttentionStack::platform() const { return impl_->options.platform; }
DType AttentionStack::dtype() const { return impl_->dtype; }
Device AttentionStack::device() const { return impl_->device; }
const KvCacheConfig& AttentionStack::kv_cache_config() const { return impl_->kv_config; }
const std::vector<StackLayer>& AttentionStack::layers() const { return impl_->layers; }

const StackLayer& AttentionStack::layer(int layer_index) const {
  return impl_->layers[impl_->slot_of(layer_index)];
}

const KvCacheTensors& AttentionStack::kv_cache(int layer_index) const {
  impl_->slot_of(layer_index);
  return impl_->storage->tensors(layer_index);
}

void AttentionStack::set_sinks(int layer_index, std::span<const float> sinks) {
  Impl& s = *impl_;
  const size_t slot = s.slot_of(layer_index);
  StackLayer& layer = s.layers[slot];
  if (layer.params.sinks.empty()) {
    throw Error(
        ErrorCode::kInvalidArgument,
        fmt::format("layer {} ({}) has no attention sinks to set", layer_index, layer.name));
  }
  if (sinks.size() != layer.params.sinks.size()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("layer {} ({}): {} sink values given, the layer has {} heads",
                            layer_index, layer.name, sinks.size(), layer.params.sinks.size()));
  }
  layer.params.sinks.assign(sinks.begin(), sinks.end());
  s.impls[slot] = layer.selection->chosen->make_impl(layer.params);
}

void AttentionStack::set_state_params(int layer_index, std::span<const float> params) {
  Impl& s = *impl_;
  const size_t slot = s.slot_of(layer_index);
  StackLayer& layer = s.layers[slot];
  if (!layer.params.state) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("layer {} ({}) is an attention layer; only state layers take state "
                            "parameters",
                            layer_index, layer.name));
  }
  const size_t want = state_param_count(*layer.params.state);
  if (params.size() != want) {
    throw Error(
        ErrorCode::kInvalidArgument,
        fmt::format("layer {} ({}): {} parameter values given, but {} needs {} "
                    "(docs/state_layers.md lists the segments)",
                    layer_index, layer.name, params.size(), layer.params.state->describe(), want));
  }
  layer.params.state_params.assign(params.begin(), params.end());
  s.impls[slot] = layer.selection->chosen->make_impl(layer.params);
}

int AttentionStack::num_blocks() const { return impl_->storage->num_blocks(); }
int AttentionStack::num_free_blocks() const { return impl_->kv->num_free_blocks(); }

void AttentionStack::add_request(RequestId id, int encoder_len) {
  impl_->kv->add_request(id, encoder_len);
}

void AttentionStack::free_request(RequestId id) { impl_->kv->free_request(id); }
bool AttentionStack::has_request(RequestId id) const { return impl_->kv->has_request(id); }
int AttentionStack::num_requests() const { return impl_->kv->num_requests(); }
int AttentionStack::num_tokens(RequestId id) const { return impl_->kv->num_tokens(id); }

void AttentionStack::plan_step(std::span<const StepRequest> batch, const ExecutionContext& ctx) {
  Impl& s = *impl_;
  s.check_batch(batch);
  // All or nothing: the blocks every request needs (net of its windows' releases) must be
  // free before any table grows.
  long needed = 0;
  for (const StepRequest& r : batch) {
    needed += s.kv->num_blocks_needed(r.id, r.num_computed_tokens, r.num_new_tokens);
  }
  if (needed > s.kv->num_free_blocks()) {
    throw Error(ErrorCode::kOutOfMemory,
                fmt::format("out of KV-cache blocks: the step needs {}, {} free (of {}); free "
                            "requests or make the stack with more blocks",
                            needed, s.kv->num_free_blocks(), s.storage->num_blocks()));
  }
  for (const StepRequest& r : batch) {
    const AllocationStatus status =
        s.kv->allocate_slots(r.id, r.num_computed_tokens, r.num_new_tokens);
    ATTNKIT_CHECK(status.ok, "a step's blocks were counted free but could not be allocated");
  }
  s.step = build_step_metadata(*s.kv, batch);
  for (size_t g = 0; g < s.groups.size(); ++g) {
    Impl::Group& group = s.groups[g];
    for (size_t b = 0; b < group.builders.size(); ++b) {
      group.plans[b] = &group.builders[b].second->build(s.step[g], ctx);
    }
  }
}

const CommonAttentionMetadata& AttentionStack::step_metadata(int group) const {
  const Impl& s = *impl_;
  if (s.step.empty()) {
    throw Error(ErrorCode::kInvalidArgument, "no step is planned yet: call plan_step() first");
  }
  if (group < 0 || group >= static_cast<int>(s.step.size())) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("KV-cache group {} does not exist; groups are 0..{}", group,
                            s.step.size() - 1));
  }
  return s.step[static_cast<size_t>(group)];
}

void AttentionStack::forward(int layer_index, const TensorView& query, const TensorView& key,
                             const TensorView& value, const TensorView& output,
                             const ExecutionContext& ctx) {
  Impl& s = *impl_;
  const size_t slot = s.slot_of(layer_index);
  if (s.step.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("forward(layer {}): no step is planned yet: call plan_step() first",
                            layer_index));
  }
  const StackLayer& layer = s.layers[slot];
  const Impl::Group& group = s.groups[static_cast<size_t>(layer.group)];
  const AttentionMetadata& plan = *group.plans[s.builder_of[slot]];
  s.impls[slot]->forward(query, key, value, s.storage->tensors(layer_index), plan, output, ctx);
}

}  // namespace attnkit
