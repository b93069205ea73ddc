#pragma once
// The geometry of multi-head latent attention (MLA, DeepSeek-V2/V3) in its absorbed form,
// the one definition the MLA kernels, their backends' capabilities and the model reader use.
//
// Each token's cache row is one latent vector of kMlaLatentDim = kv_lora_rank + rope dim
// values: the first kMlaValueDim (= kv_lora_rank) are the compressed KV, which is also the
// value V; the last kMlaRopeDim are the decoupled rotary key. Every query head attends over
// the same rows (one KV head), with head_size = kMlaLatentDim and head_size_v = kMlaValueDim.

namespace attnkit {

inline constexpr int kMlaKvLoraRank = 512;                          // DeepSeek-V2/V3
inline constexpr int kMlaRopeDim = 64;                              // qk_rope_head_dim
inline constexpr int kMlaLatentDim = kMlaKvLoraRank + kMlaRopeDim;  // 576: head_size
inline constexpr int kMlaValueDim = kMlaKvLoraRank;                 // 512: head_size_v

}  // namespace attnkit
