#pragma once
// The backend protocol (DESIGN.md, step 1 "Declare"). A backend is:
//   - static capabilities (data) plus an optional combination hook, checked by validate();
//   - a metadata builder factory (per KV-cache group);
//   - an implementation factory (per layer) whose forward() writes new K/V into the paged
//     cache and computes attention;
//   - how it wants the KV cache: layout, kernel block sizes, preferred block size, and an
//     optional customize_spec().

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attnkit/backend/capabilities.h"
#include "attnkit/backend/metadata.h"
#include "attnkit/backend/selector_config.h"
#include "attnkit/core/execution.h"
#include "attnkit/core/kv_cache_spec.h"
#include "attnkit/core/platform.h"
#include "attnkit/core/tensor.h"
#include "attnkit/export.h"

namespace attnkit {

// Everything one attention layer's implementation needs to know, fixed at start-up.
struct ATTNKIT_API AttentionLayerParams {
  int layer_index = 0;
  KvCacheKind kind = KvCacheKind::kFullAttention;
  AttentionType attn_type = AttentionType::kDecoder;
  int num_heads = 0;
  int num_kv_heads = 0;      // MLA: 1
  int head_size = 0;         // MLA: kv_lora_rank + rope dim
  int head_size_v = 0;       // MLA: kv_lora_rank
  float scale = 1.0f;        // softmax scale
  int sliding_window = 0;    // 0 = none
  int chunk_size = 0;        // 0 = none
  float soft_cap = 0.0f;     // 0 = none
  std::vector<float> sinks;  // [num_heads] sink logits, or empty
  DType dtype = DType::kBFloat16;
  KvCacheDType kv_cache_dtype = KvCacheDType::kAuto;
  float k_scale = 1.0f;  // fp8 per-tensor scales
  float v_scale = 1.0f;
  bool use_mla = false;
  int mla_rope_dim = 0;
  // A recurrent-state layer: its state sizes (the attention fields above are unused) and
  // its parameters, packed in the order state_param_layout() gives (backend/state_params.h).
  std::optional<StateLayerDims> state;
  std::vector<float> state_params;
  // forward()'s checked mode (backend/forward_check.h); nullopt = the process default
  // (ATTNKIT_CHECKED, else on in debug builds).
  std::optional<bool> checked;

  bool is_causal() const { return attn_type == AttentionType::kDecoder; }
};

// The paged KV cache of one layer, as the backend asked for it.
//   NHD: key [num_blocks, block_size, num_kv_heads, head_size],
//        value [num_blocks, block_size, num_kv_heads, head_size_v]
//   HND: key [num_blocks, num_kv_heads, block_size, head_size], value likewise
//   MLA: key [num_blocks, block_size, 1, latent_width] (NHD), value empty (V = key prefix)
// Encoder-only layers have no cache (both views empty). block_size here is the kernel
// block size (a cache block may be viewed as several kernel blocks): the KV-cache group's
// kernel_block_size, like CommonAttentionMetadata::block_size, which must equal it.
struct ATTNKIT_API KvCacheTensors {
  TensorView key;
  TensorView value;
  KvLayout layout = KvLayout::kNHD;
  int block_size = 0;
};

// The two phases of a step's requests (vLLM's split): decode rows belong to requests whose
// query length this step is at most kDecodeQueryLen, prefill rows to the others.
enum class Phase { kPrefill, kDecode };
inline constexpr int kDecodeQueryLen = 1;
ATTNKIT_API std::string_view to_string(Phase phase);

class ATTNKIT_API AttentionImpl {
 public:
  virtual ~AttentionImpl() = default;
  // The backend that actually executes this layer (reported by the runtime).
  virtual std::string_view backend_name() const = 0;
  // The backend that executes this layer's rows of `phase`: backend_name(), except for an
  // implementation that sends prefill and decode rows to different backends
  // (backend/composite_backend.h).
  virtual std::string_view phase_backend_name(Phase /*phase*/) const { return backend_name(); }
  // query [T, num_heads, head_size]; key [T, num_kv_heads, head_size] and value
  // [T, num_kv_heads, head_size_v] are this step's fresh K/V (empty for cross attention
  // steps whose encoder K/V is already cached; MLA: key is the latent, value empty);
  // output [T, num_heads, head_size_v]. Writes key/value into `cache` at the plan's slot
  // mapping, then computes attention for every query token. Throws Error on bad input.
  // A device backend launches on ctx.stream and returns without waiting (core/execution.h);
  // `metadata` must come from a build() with the same stream (or one ordered before it).
  virtual void forward(const TensorView& query, const TensorView& key, const TensorView& value,
                       const KvCacheTensors& cache, const AttentionMetadata& metadata,
                       const TensorView& output, const ExecutionContext& ctx = {}) = 0;
};

class ATTNKIT_API AttentionBackend {
 public:
  virtual ~AttentionBackend() = default;

  // The user-facing name, upper case (e.g. "CPU_FLASH").
  virtual std::string_view name() const = 0;
  // One line on what it is.
  virtual std::string_view description() const = 0;
  virtual const BackendCapabilities& capabilities() const = 0;

  // Reasons this backend cannot serve `config` on `platform`: every capability reason plus
  // those of the combination hook. Empty = it can.
  std::vector<std::string> validate(const SelectorConfig& config, const Platform& platform) const;

  // Why this binary cannot run this backend's kernels on `platform` (e.g. "not built into
  // this binary", "no kernels for sm_75 in this binary (carries sm_80, sm_90)"), or nullopt.
  // Default: nullopt for CPU backends, platform.kernels_in_binary_reason() for CUDA ones.
  virtual std::optional<std::string> binary_reason(const Platform& platform) const;

  // KV layout the kernels read: capabilities().required_layout or NHD.
  KvLayout kv_layout() const;
  // The cache block size this backend wants for `spec` (default: preferred_block_size).
  virtual int preferred_block_size(const KvCacheSpec& spec) const;
  // May adjust a layer's KV-cache spec (block size, dtype). Default: unchanged.
  virtual KvCacheSpec customize_spec(const KvCacheSpec& spec) const { return spec; }

  // A builder for one KV-cache group whose layers all use `layer` shapes.
  virtual std::unique_ptr<MetadataBuilder> make_builder(
      const KvCacheSpec& spec, const AttentionLayerParams& layer) const = 0;
  // The implementation of one layer.
  virtual std::unique_ptr<AttentionImpl> make_impl(const AttentionLayerParams& layer) const = 0;

 protected:
  // Combination hook: requirements a flat capability list cannot say (e.g. "fp8 KV only
  // with head_size 128"). Return one reason per violation.
  virtual std::vector<std::string> check_combination(const SelectorConfig& /*config*/,
                                                     const Platform& /*platform*/) const {
    return {};
  }
};

}  // namespace attnkit
