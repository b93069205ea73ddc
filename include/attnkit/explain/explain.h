#pragma once
// `attnkit explain` as a library: for every layer of a model, on a platform, which backend
// the selector picks and why (every rejected candidate with its reasons), and the KV cache
// those choices shape (groups, block sizes, layouts, page sizes, bytes per token).
// The CLI prints to_text() or to_json(); the runtime and tests use explain() directly.

#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "attnkit/core/platform.h"
#include "attnkit/export.h"
#include "attnkit/kv_cache/kv_cache_config.h"
#include "attnkit/model/model_description.h"
#include "attnkit/registry/registry.h"
#include "attnkit/selector/attention_config.h"
#include "attnkit/selector/selector.h"

namespace attnkit {

struct ATTNKIT_API ExplainRequest {
  Platform platform = cpu_platform();
  std::optional<DType> dtype;  // nullopt: the model's torch_dtype, else bfloat16
  KvCacheDType kv_cache_dtype = KvCacheDType::kAuto;
  std::optional<int> block_size;  // the user's cache block size, if any
  AttentionConfig attention;      // ATTNKIT_ATTENTION_BACKEND already applied
  // Where "tuned" choices read their timings (nothing is measured by explain); empty =
  // default_tuning_cache_path() (selector/tuning.h).
  std::string tuning_cache;
};

struct ATTNKIT_API LayerOutcome {
  LayerSpec layer;
  // The selection of this layer's configuration (shared by every layer with the same
  // configuration); null for layers that need no attention backend.
  std::shared_ptr<const SelectionResult> selection;
  int kv_cache_group = -1;  // KvCacheConfig group id; -1 for non-attention layers
};

struct ATTNKIT_API Explanation {
  ModelDescription model;
  Platform platform;
  DType dtype = DType::kBFloat16;
  KvCacheDType kv_cache_dtype = KvCacheDType::kAuto;  // as requested (may be auto)
  std::optional<int> block_size;
  AttentionConfig attention;
  std::vector<LayerOutcome> layers;  // one per model layer, in order
  KvCacheConfig kv_cache;
  // False when this binary cannot run some chosen backend on the platform (a platform
  // described rather than present, e.g. cuda:9.0 on a CPU-only build); notes say why.
  bool runnable = true;
  // What the layers' configurations carry: kv_cache_dtype resolved against dtype, as
  // selection resolved it (resolve_kv_cache_dtype).
  KvCacheDType resolved_kv_cache_dtype() const {
    return resolve_kv_cache_dtype(kv_cache_dtype, dtype);
  }
  std::vector<std::string> notes;     // distinct binary reasons
  std::vector<std::string> warnings;  // the model's and the selector's, distinct
  // Per chosen backend, the kernel variant that will run (kernel_variant()).
  std::map<std::string, std::string> kernel_variants;
  // Per chosen backend, what its forward() allows under CUDA graph capture
  // (BackendCapabilities::cuda_graphs, e.g. "uniform_batch").
  std::map<std::string, std::string> cuda_graphs;
  // Every option of core/options.h set in the environment: name -> value.
  std::map<std::string, std::string> options;
};

// Which kernels `backend` runs on `platform` with this build and the options in force:
// the CPU ISA for CPU_FLASH and CPU_MLA (e.g. "cpu isa avx2"); for CUDA_FLASH whether the
// sm_90a wgmma prefill runs, and for the CUDA backends whether launches are dependent.
// Empty for backends with one variant (REFERENCE, plugins). Throws the option's Error
// when ATTNKIT_CPU_ISA names a target this CPU cannot run or an option has a bad value.
ATTNKIT_API std::string kernel_variant(std::string_view backend, const Platform& platform);

// Selects a backend for every attention layer and plans the KV cache. Throws the
// selector's and the planner's Errors (strict user choice that cannot serve a layer, no
// backend for a layer, a block size no backend takes), prefixed with the layer.
ATTNKIT_API Explanation explain(const ModelDescription& model, const ExplainRequest& request,
                                const BackendRegistry& registry = global_registry());

// For people: the model and platform, layers grouped by identical outcome, the KV-cache
// groups, and per distinct configuration every candidate with its reasons.
ATTNKIT_API std::string to_text(const Explanation& explanation);

// For programs; the schema is docs/schemas/explain.schema.json (null where a field does
// not apply):
// {"schema_version", "model", "model_type", "architecture", "source", "platform",
// "platform_is_local",
//  "runnable", "notes", "dtype", "kv_cache_dtype" (as requested, may be "auto"),
//  "resolved_kv_cache_dtype" (what the layers carry), "block_size", "attention_config", "warnings",
//  "kernel_variants": {"BACKEND": variant}, "cuda_graphs": {"BACKEND": support}, "options":
//  {"NAME": value}, "layers": [{"index", "name", "layer_type", "is_attention", "kind", "attn_type",
//              "num_heads", "num_kv_heads", "head_size", "head_size_v", "scale",
//              "sliding_window", "chunk_size", "soft_cap", "sinks", "uses_rope", "mla",
//              "backend", "chosen_by", "requested", "rejected": {"NAME": [reasons]},
//              "kv_cache_group", "note"}],
//  "kv_cache_groups": [{"id", "kind", "spec", "cache_spec": {"kind", "block_size",
//              "num_kv_heads", "head_size", "head_size_v", "dtype", "sliding_window",
//              "chunk_size", "max_encoder_len", "bytes_per_token"}, "layers", "backend",
//              "backends", "block_size", "kernel_block_size", "layout", "page_size_bytes",
//              "kv_bytes_per_token", "has_cache"}],
//  "page_size_bytes", "num_buffers", "kv_bytes_per_token"}
ATTNKIT_API nlohmann::json to_json(const Explanation& explanation);

// Layer indices as compact ranges: {0,1,2,3,4,6,7} -> "0-4, 6-7". Six or more runs in a
// regular pattern are elided: {0,2,4,...,22} -> "0, 2, ..., 22"; layers 0-47 but every
// fourth -> "0-2, 4-6, ..., 44-46".
ATTNKIT_API std::string format_layer_list(const std::vector<int>& layers);

}  // namespace attnkit
