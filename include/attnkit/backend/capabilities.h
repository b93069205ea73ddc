#pragma once
// A backend's static capabilities: data, not code. validate_capabilities() derives from
// them one reason per unmet requirement; the same record drives kernel choice, so a
// backend never claims what its kernels cannot run.

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "attnkit/backend/selector_config.h"
#include "attnkit/core/enums.h"
#include "attnkit/core/platform.h"
#include "attnkit/export.h"

namespace attnkit {

// A set of integers given as an explicit list, or as a rule "multiple of N in [min, max]".
// Used for head sizes and kernel block sizes.
struct ATTNKIT_API SizeRule {
  std::vector<int> exact;  // when non-empty, exactly these values
  int multiple_of = 0;     // when exact is empty: value % multiple_of == 0
  int min = 1;
  int max = 0;  // 0 = unbounded

  static SizeRule list(std::vector<int> values);
  static SizeRule multiple(int n, int min_value = 1, int max_value = 0);
  static SizeRule any() { return multiple(1); }
  bool allows(int value) const;
  // "64, 128, 256" or "multiples of 16 up to 256" or "any"
  std::string describe() const;
  // Concrete values in [lo, hi] this rule allows (for enumerating test cases).
  std::vector<int> enumerate(int lo, int hi) const;
};

// Which batches a CUDA graph captured from one forward() may be replayed with (vLLM's
// AttentionCGSupport). Replays keep the captured tensors' addresses and the batch shape:
// request count, query tokens of each request and block-table width; the sequence lengths,
// block tables, slot mappings and the tensors' contents change (core/execution.h).
enum class CudaGraphSupport {
  kNever,                     // forward() cannot be captured
  kUniformSingleTokenDecode,  // batches of one query token per request
  kUniformBatch,              // batches whose requests all have the same query tokens
  kAlways,                    // any batch of the captured shape
};
ATTNKIT_API const char* to_string(CudaGraphSupport support);

struct ATTNKIT_API BackendCapabilities {
  PlatformKind platform = PlatformKind::kCpu;
  // CUDA only: compute capability range as major*10+minor; 0 = unbounded.
  int min_compute_capability = 0;
  int max_compute_capability = 0;

  std::vector<DType> dtypes;
  // Concrete KV-cache dtypes the kernels store besides the compute dtype's own, which is
  // always accepted (what "auto" resolves to: resolve_kv_cache_dtype).
  std::vector<KvCacheDType> kv_cache_dtypes;
  SizeRule head_sizes = SizeRule::any();
  bool separate_v_head_size = false;  // head_size_v may differ from head_size
  SizeRule kernel_block_sizes = SizeRule::any();
  int preferred_block_size = 16;
  std::vector<AttentionType> attention_types{AttentionType::kDecoder};

  bool mla = false;       // serves MLA layers (and only those when mla_only)
  bool mla_only = false;  // serves nothing but MLA layers
  bool sliding_window = false;
  bool chunked_local = false;
  bool sinks = false;        // learned per-head sink logits
  bool sink_tokens = false;  // static sink tokens held in the cache (sink_full_attention)
  bool soft_cap = false;
  bool non_causal = false;  // bidirectional attention (encoder, encoder-only, cross)
  bool batch_invariant = false;
  bool kv_connector = false;
  std::optional<KvLayout> required_layout;  // nullopt = NHD by default, either accepted
  // Recurrent-state layers (kind mamba) it serves. A backend serves attention layers or
  // state layers, never both: empty = attention layers only.
  std::vector<StateLayerType> state_layer_types;
  // What its metadata builder and forward() allow under CUDA graph capture.
  CudaGraphSupport cuda_graphs = CudaGraphSupport::kNever;

  // One line per field, for `attnkit backends`.
  std::vector<std::pair<std::string, std::string>> describe() const;
};

// The typed JSON of a rule: {"values": [64, 128]} for a list, else
// {"multiple_of": N, "min": M, "max": X or null when unbounded} ("any" is multiple_of 1).
ATTNKIT_API nlohmann::json to_json(const SizeRule& rule);

// The typed JSON of the capabilities (docs/schemas/backends.schema.json, "capabilities"):
// enums as their names, lists as arrays, rules as to_json(SizeRule), flags as booleans,
// the compute-capability range as {"min": {"major", "minor"} or null, "max": ...} (null off
// CUDA). describe() gives the same fields as sentences.
ATTNKIT_API nlohmann::json to_json(const BackendCapabilities& caps);

// True when a cache block of `block_size` tokens can be served by kernels of these block
// sizes: directly, or viewed as several kernel blocks of a size that divides it.
ATTNKIT_API bool block_size_servable(const SizeRule& kernel_block_sizes, int block_size);

// One reason per unmet requirement of `config` on `platform`, each naming the value and
// what is supported, e.g. "head_size 96 not supported (supported: 64, 128, 256)".
// Checks the platform kind and compute-capability range, not whether this binary carries
// kernels (see AttentionBackend::binary_reason).
ATTNKIT_API std::vector<std::string> validate_capabilities(const BackendCapabilities& caps,
                                                           const SelectorConfig& config,
                                                           const Platform& platform);

}  // namespace attnkit
