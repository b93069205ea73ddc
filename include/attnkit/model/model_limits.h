#pragma once
// Bounds on the size fields of a model config. Published models stay far below them
// (heads <= 128, head sizes <= 256, MLA latent 512 + rope 64, hidden <= 32768); they exist
// so that every product and sum of sizes attnkit forms (head size x heads x block size x
// bytes, nope + rope dims) fits in 64 bits with room to spare, and a corrupt or hostile
// config fails at load with the field and the bound named instead of overflowing later.

namespace attnkit {

inline constexpr int kMaxModelLayers = 1024;         // num_hidden_layers and the like
inline constexpr int kMaxModelHeads = 1024;          // query and KV heads of a layer
inline constexpr int kMaxModelHeadSize = 4096;       // head_dim, d_kv, v_head_dim
inline constexpr int kMaxModelHiddenSize = 1 << 20;  // hidden_size (head_dim derived)
inline constexpr int kMaxModelLatentRank = 8192;     // MLA kv_lora_rank, q_lora_rank
inline constexpr int kMaxModelRopeHeadDim = 1024;    // MLA qk_rope_head_dim, qk_nope_head_dim
inline constexpr int kMaxModelContext = 1 << 30;     // windows, chunks, position limits

}  // namespace attnkit
