#pragma once
// The model runner's state (model_runner.cpp: start-up; runner_loop.cpp: steps).

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "attnkit/kv_cache/kv_cache_config.h"
#include "attnkit/kv_cache/kv_cache_storage.h"
#include "attnkit/runtime/model_runner.h"
#include "attnkit/runtime/qkv_generator.h"
#include "runtime/device_io.h"

namespace attnkit {

struct ModelRunner::Impl {
  struct Layer {
    LayerSpec spec;
    AttentionLayerParams params;
    KvCacheSpec kv_spec;
    std::shared_ptr<const SelectionResult> selection;
    std::shared_ptr<const AttentionBackend> backend;
    std::unique_ptr<AttentionImpl> impl;
    int group = 0;
    // Encoder layers of an encoder-decoder model run over encoder tokens, once per request.
    bool encoder_pass() const { return spec.attn_type == AttentionType::kEncoder; }
  };
  struct Group {
    // One builder per backend serving the group (usually one), by backend name.
    std::map<std::string, std::unique_ptr<MetadataBuilder>> builders;
    bool encoder_pass = false;
    std::set<std::string> executed;
    // Per phase: the backends that ran the group's prefill rows and its decode rows
    // (AttentionImpl::phase_backend_name()).
    std::set<std::string> executed_prefill, executed_decode;
    long forward_calls = 0;
  };

  ModelDescription model;
  Platform platform;
  RunnerOptions options;
  DType dtype = DType::kBFloat16;
  QkvGenerator gen;
  std::vector<std::string> notes;
  std::vector<Layer> layers;  // attention layers, model order
  std::vector<PlannedLayer> planned;
  std::vector<std::string> warnings;  // the start-up plan's (StartupPlan::warnings)
  KvCacheConfig kv_config;
  int num_blocks = 0;
  std::unique_ptr<DeviceIo> io;  // where tensors live: host, or the CUDA device
  std::unique_ptr<KvCacheStorage> storage;
  std::vector<Group> groups;
  // Some layer's backend sends prefill and decode rows to different backends: each step's
  // batch is then ordered decode requests first.
  bool splits_phases = false;

  Impl(ModelDescription m, const Platform& p, RunnerOptions o)
      : model(std::move(m)),
        platform(p),
        options(std::move(o)),
        dtype(resolve_model_dtype(options.dtype, model, platform)),
        gen(options.seed, dtype) {}

  bool encoder_only() const {
    return std::all_of(layers.begin(), layers.end(), [](const Layer& l) {
      return l.spec.attn_type == AttentionType::kEncoderOnly;
    });
  }

  // One run of the step loop (runner_loop.cpp).
  class StepLoop;

  void select_and_plan(const Selector& selector);
  RunReport run(std::span<const RequestSpec> requests);
};

}  // namespace attnkit
