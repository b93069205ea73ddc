#pragma once
// The model runner: drives real steps of a model's attention layers through the backends
// the selector chose, over a paged KV cache, as an engine would.
//
// Start-up (constructor):
//   1. every attention layer's SelectorConfig is selected once per distinct config;
//   2. the KV cache is planned from the chosen backends (groups, per-group block sizes,
//      one page size) and allocated;
//   3. each group gets its backend's metadata builder, each layer its implementation.
// Each step (run()):
//   the scheduler picks the batch (continuous batching, chunked prefill, preemption);
//   the block tables grow (and windows release); one CommonAttentionMetadata per group is
//   built and handed to the group's builder once; then, layer by layer, synthetic Q/K/V
//   (runtime/qkv_generator.h) go through forward(), which writes K/V into the cache and
//   attends. With verification on, sampled (or all) output rows are recomputed densely
//   (runtime/dense_verifier.h) right after each forward.
// Encoder-decoder models encode a request's encoder tokens (encoder layers, one pass) in
// the step that admits it, and cross attention caches their K/V then; encoder-only models
// run each request's whole prompt in one pass, without a cache.

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "attnkit/core/platform.h"
#include "attnkit/export.h"
#include "attnkit/kv_cache/kv_cache_config.h"
#include "attnkit/model/model_description.h"
#include "attnkit/runtime/request.h"
#include "attnkit/runtime/run_report.h"
#include "attnkit/runtime/scheduler.h"
#include "attnkit/selector/selector.h"

namespace attnkit {

struct ATTNKIT_API VerifyOptions {
  bool enabled = false;
  // Output rows checked per layer per step, chosen by a seeded hash; 0 = every row.
  int samples_per_layer_step = 4;
  // 0 = default_tolerance(dtype).
  double tolerance = 0.0;
};

// Progress after each step, for progress bars.
struct ATTNKIT_API StepProgress {
  int64_t step = 0;
  int steps_run = 0;
  int requests_finished = 0;
  int requests_total = 0;
  long tokens_done = 0;
  long tokens_total = 0;  // estimate: every request's prompt + output - 1 (recomputes excluded)
};

struct ATTNKIT_API RunnerOptions {
  std::optional<DType> dtype;  // compute dtype; default: the model's, else bf16
  KvCacheDType kv_cache_dtype = KvCacheDType::kAuto;
  std::optional<int> block_size;  // user cache block size
  // Pool blocks including the null block; 0 = as many as kv_cache_memory holds.
  int num_blocks = 0;
  size_t kv_cache_memory = size_t{256} << 20;
  SchedulerOptions scheduler;
  uint64_t seed = 0;
  VerifyOptions verify;
  // forward()'s checked mode for every layer (backend/forward_check.h): metadata verified
  // before each kernel, and a non-finite output row fails the run naming its request id.
  // nullopt = ATTNKIT_CHECKED, else on in debug builds.
  std::optional<bool> checked;
  // Reductions for quick runs and tests (noted in the report): keep at most this many
  // layers of each (attention type, kind) in model order (0 = all), and cap sliding
  // windows and chunk sizes at this many tokens (0 = as configured).
  int max_layers_per_kind = 0;
  int window_cap = 0;
  std::function<void(const StepProgress&)> on_step;
};

struct ATTNKIT_API PlannedLayer {
  int layer_index = 0;
  std::string name;
  KvCacheKind kind = KvCacheKind::kFullAttention;
  AttentionType attn_type = AttentionType::kDecoder;
  std::string backend;  // chosen
  std::string chosen_by;
  int group = 0;
};

class ATTNKIT_API ModelRunner {
 public:
  // Selects, plans and allocates. `selector` (and its registry) must outlive the runner.
  // `platform` must be this machine's: its CPU, or its CUDA device (tensors and the KV
  // cache then live in device memory; needs a CUDA build). Throws Error when selection
  // fails, for a described (not local) platform, or when the cache options are bad.
  ModelRunner(const ModelDescription& model, const Platform& platform, const Selector& selector,
              RunnerOptions options);
  ~ModelRunner();
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  // The model as run (after reductions).
  const ModelDescription& model() const;
  const std::vector<PlannedLayer>& layers() const;
  // The KV-cache plan the chosen backends shaped (groups, block sizes, page size).
  const KvCacheConfig& kv_config() const;
  // Usable pool blocks (the null block excluded).
  int num_usable_blocks() const;
  // What was selected, one line per KV-cache group, e.g.
  //   "group 0: sliding_window(512) ... layers 0-4,6-10 -> CPU_FLASH (auto), block 16"
  std::string selection_summary() const;
  DType dtype() const;
  bool is_encoder_decoder() const;
  bool is_encoder_only() const;

  // Serves `requests` to completion and reports. Requests of encoder-decoder models need
  // 1 <= encoder_len <= the model's max encoder length; encoder-only models compute each
  // prompt in one pass (output_len is taken as 1). Throws Error for bad requests, and
  // Error(kOutOfMemory) when the cache cannot hold a request even alone. Each call starts
  // from an empty cache.
  RunReport run(std::span<const RequestSpec> requests);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The model with the reductions of `options` applied (layers kept, windows capped), and
// one note per reduction.
ATTNKIT_API ModelDescription reduce_model(const ModelDescription& model, int max_layers_per_kind,
                                          int window_cap,
                                          std::vector<std::string>* notes = nullptr);

}  // namespace attnkit
