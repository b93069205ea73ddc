#pragma once
// A model as attnkit sees it: the attention layers read from a Hugging Face config.json,
// each with everything the selector and a backend's implementation need. Layers that are
// not attention at all (linear attention, mamba, convolution blocks of hybrid models) are
// kept in the list, marked is_attention = false, so that a report can say "no attention
// backend needed" for them instead of skipping indices.

#include <optional>
#include <string>
#include <vector>

#include "attnkit/core/enums.h"
#include "attnkit/core/platform.h"
#include "attnkit/core/state_spec.h"
#include "attnkit/export.h"

namespace attnkit {

// Multi-head latent attention (DeepSeek-V2/V3). The cache holds one latent vector per
// token: kv_lora_rank compressed K/V followed by the qk_rope_head_dim rotary part, so the
// "absorbed" head size is kv_lora_rank + qk_rope_head_dim and V is its first kv_lora_rank
// elements.
struct ATTNKIT_API MlaDims {
  int kv_lora_rank = 0;
  int qk_rope_head_dim = 0;
  int qk_nope_head_dim = 0;
  int v_head_dim = 0;
  std::optional<int> q_lora_rank;  // null in DeepSeek-V2-Lite
  bool operator==(const MlaDims&) const = default;
};

struct ATTNKIT_API LayerSpec {
  int index = 0;     // position in ModelDescription::layers
  std::string name;  // e.g. "layers.5.self_attn", "decoder.layers.0.encoder_attn"
  // The config's own word for this layer ("full_attention", "sliding_attention",
  // "chunked_attention", "linear_attention", "mamba", ...).
  std::string layer_type;
  // False for layers that are not softmax attention (recurrent-state layers, and MLP or
  // MoE blocks that some hybrid configs list as layers); the attention fields below are
  // then meaningless.
  bool is_attention = true;
  // Recurrent-state layers (kind kMamba): the state the layer keeps per request. Served
  // by a state backend, selected like an attention backend.
  std::optional<StateLayerDims> state;

  AttentionType attn_type = AttentionType::kDecoder;
  KvCacheKind kind = KvCacheKind::kFullAttention;  // core/layer_kind.h
  int num_heads = 0;
  int num_kv_heads = 0;  // MLA: 1 (one latent vector per token)
  int head_size = 0;     // MLA: kv_lora_rank + qk_rope_head_dim
  int head_size_v = 0;   // MLA: kv_lora_rank
  float scale = 1.0f;    // softmax scale
  std::optional<int> sliding_window;
  std::optional<int> chunk_size;  // chunked local attention (Llama-4 RoPE layers)
  bool has_sinks = false;         // learned per-head sink logits (gpt-oss); kind unchanged
  int sink_len = 0;               // static sink tokens held in the cache (sink_full_attention)
  std::optional<float> soft_cap;  // attention logit soft-capping (Gemma-2)
  bool uses_rope = true;          // false for Llama-4's NoPE layers
  std::optional<MlaDims> mla;

  bool operator==(const LayerSpec&) const = default;
  // Attention and state layers are served by a backend; MLP blocks are not.
  bool needs_backend() const { return is_attention || state.has_value(); }
};

struct ATTNKIT_API ModelDescription {
  std::string name;            // embedded name or the config file's name
  std::string source;          // the file read, or "embedded:<name>"
  std::string model_type;      // of the text model (e.g. "gemma3_text" under "gemma3")
  std::string architecture;    // architectures[0], or empty
  std::optional<DType> dtype;  // torch_dtype when it is a compute dtype attnkit knows
  bool is_encoder_decoder = false;
  int max_encoder_len = 0;  // cross attention: the encoder's maximum length (else 0)
  std::vector<LayerSpec> layers;
  // Things a user should know (e.g. "unknown model_type 'foo': read as a plain decoder").
  std::vector<std::string> warnings;

  int num_attention_layers() const;
  int num_state_layers() const;
};

// e.g. "sliding_window(512)", "chunked_local_attention(8192)", "full_attention",
// "mla_attention", "mamba(gated_delta_net)" or "no attention (mlp)".
ATTNKIT_API std::string describe_kind(const LayerSpec& layer);

// The compute dtype a model runs in (vLLM's "auto" dtype): `requested` when given; else
// the checkpoint's float16 or bfloat16; a float32 checkpoint (or none) runs in bfloat16
// where the platform computes in it (CPU, CUDA compute capability 8.0+), else float16.
ATTNKIT_API DType resolve_model_dtype(std::optional<DType> requested, const ModelDescription& model,
                                      const Platform& platform);

}  // namespace attnkit
