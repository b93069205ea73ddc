#pragma once
// The attention of a whole model as one object an engine (or a Python caller) drives: the
// start-up plan (a backend for every attention layer, the KV cache they shape), the cache
// memory and its block pool, one metadata builder per KV-cache group and backend, and one
// implementation per layer. Each step the caller schedules requests; plan_step() gives
// them their cache slots and plans every group once; forward() runs one layer on the
// caller's tensors, which it neither copies nor keeps.
//
//   AttentionStack stack(load_model("llama-3.1-8b-instruct"), {.platform = ...});
//   stack.add_request(7);
//   stack.plan_step({{7, 0, prompt_len}}, ctx);           // prefill
//   for (layer : stack.layers()) stack.forward(layer.index, q, k, v, out, ctx);
//   stack.plan_step({{7, prompt_len, 1}}, ctx);           // decode
//   ...
//   stack.free_request(7);
//
// On a CUDA platform the cache lives on the CUDA device current on the calling thread at
// construction (cudaSetDevice), which must be current for every later call; every builder
// is reserved
// for the options' StepLimits (core/execution.h), so that after construction plan_step()
// and forward() allocate nothing and launch on ctx.stream only, and a forward() may be
// captured into a CUDA graph (plan with ctx.graph_shape, see CudaGraphSupport).
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "attnkit/backend/backend.h"
#include "attnkit/core/execution.h"
#include "attnkit/core/platform.h"
#include "attnkit/export.h"
#include "attnkit/kv_cache/common_metadata_builder.h"
#include "attnkit/kv_cache/kv_cache_config.h"
#include "attnkit/model/model_description.h"
#include "attnkit/selector/attention_config.h"
#include "attnkit/selector/selector.h"

namespace attnkit {

struct ATTNKIT_API AttentionStackOptions {
  // Where the layers run: the CPU, or this machine's current CUDA device
  // (local_cuda_platform()); a described platform, e.g. parse_platform("cuda:9.0") on a
  // CPU machine, is refused.
  Platform platform = cpu_platform();
  std::optional<DType> dtype;  // compute dtype; default: the model's torch_dtype, else bf16
  KvCacheDType kv_cache_dtype = KvCacheDType::kAuto;
  std::optional<int> block_size;  // the user's cache block size, if any
  AttentionConfig attention;      // backend, backend_per_kind, override_mode
  // Cache blocks (the null block included); 0 = as many as kv_cache_bytes holds.
  int num_blocks = 0;
  size_t kv_cache_bytes = size_t{256} << 20;
  // The largest step: requests, query tokens, and keys one request attends over (its
  // prompt and generated tokens; for cross attention, the encoder length). The block-table
  // width of each group follows from max_seq_len; max_blocks_per_req is ignored.
  StepLimits limits{256, 8192, 0, 8192};
  // forward()'s checked mode (backend/forward_check.h); nullopt = the process default.
  std::optional<bool> checked;
  // Where backend names are looked up; nullptr = global_registry(). Must outlive the stack.
  const BackendRegistry* registry = nullptr;
  // Serves "tuned" choices; nullptr = the default tuning cache with this runtime's timer,
  // which measures what the cache lacks (runtime/backend_timer.h).
  std::shared_ptr<const Tuning> tuning;
};

// One attention layer of the stack.
struct ATTNKIT_API StackLayer {
  int index = 0;  // the model's layer index
  std::string name;
  int group = 0;  // its KV-cache group
  AttentionLayerParams params;
  std::shared_ptr<const SelectionResult> selection;  // selection->backend runs it
};

class ATTNKIT_API AttentionStack {
 public:
  // Selects, plans and allocates. Throws the selector's and planner's Errors (prefixed with
  // the layer), Error(kUnsupported) for a described platform or a chosen backend this
  // binary cannot run here, Error(kInvalidArgument) for bad options (naming them) and
  // Error(kOutOfMemory) when the cache does not fit.
  explicit AttentionStack(const ModelDescription& model, const AttentionStackOptions& options = {});
  ~AttentionStack();
  AttentionStack(AttentionStack&&) noexcept;
  AttentionStack& operator=(AttentionStack&&) noexcept;
  AttentionStack(const AttentionStack&) = delete;
  AttentionStack& operator=(const AttentionStack&) = delete;

  const ModelDescription& model() const;
  const AttentionStackOptions& options() const;
  const Platform& platform() const;
  DType dtype() const;
  // Where the cache and the tensors forward() takes live.
  Device device() const;
  const KvCacheConfig& kv_cache_config() const;
  // The attention layers, in model order.
  const std::vector<StackLayer>& layers() const;
  // Error(kNotFound) naming the index and listing the attention layers.
  const StackLayer& layer(int layer_index) const;
  // The layer's paged cache (views into memory the stack owns; empty for a layer without
  // cache).
  const KvCacheTensors& kv_cache(int layer_index) const;
  // Replaces a layer's sink logits ([num_heads], e.g. a checkpoint's learned values);
  // Error(kInvalidArgument) for a layer without sinks or a wrong count.
  void set_sinks(int layer_index, std::span<const float> sinks);
  // Sets a recurrent-state layer's parameters (conv weights, A_log, dt_bias, ...: the
  // segments of state_param_layout(), backend/state_params.h, in order). Its forward()
  // refuses to run until they are set; Error(kInvalidArgument) for an attention layer or
  // a vector of the wrong size, naming the size the layer needs.
  void set_state_params(int layer_index, std::span<const float> params);

  int num_blocks() const;
  int num_free_blocks() const;

  // Requests (KvCacheManager): Error for a duplicate or unknown id, or a bad encoder length.
  void add_request(RequestId id, int encoder_len = 0);
  void free_request(RequestId id);
  bool has_request(RequestId id) const;
  int num_requests() const;
  // Tokens of the request that have cache slots.
  int num_tokens(RequestId id) const;

  // Gives each request of the batch its slots (all of them or none: Error(kOutOfMemory)
  // "out of KV-cache blocks: need N, M free" leaves every table as it was) and plans the
  // step in every KV-cache group (on ctx.stream). A batch beyond the limits is refused
  // naming the bound. The plan serves every forward() until the next plan_step().
  void plan_step(std::span<const StepRequest> batch, const ExecutionContext& ctx = {});
  // The last planned step's metadata of `group` (Error(kInvalidArgument) before the first).
  const CommonAttentionMetadata& step_metadata(int group) const;
  // Runs one layer on the last planned step: writes key/value into the layer's cache at
  // the step's slots and attends (AttentionImpl::forward; its checks and messages).
  void forward(int layer_index, const TensorView& query, const TensorView& key,
               const TensorView& value, const TensorView& output, const ExecutionContext& ctx = {});

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace attnkit
