#pragma once
// The kernel contract shared by every attention kernel (CPU and CUDA): raw pointers plus
// this params struct. Kernels never see the registry, selector or CLI.
//
// One request ("sequence") i contributes q_len(i) = query_start_loc[i+1] - query_start_loc[i]
// query tokens and attends over kv_len(i) = seq_lens[i] keys. For causal attention the
// queries are the LAST q_len(i) positions of the sequence: query j of request i sits at
// absolute position p = seq_lens[i] - q_len(i) + j and sees
// the keys of mask.h's visible-keys rule (causal limit, sliding window, chunk); non-causal
// attention (encoder, encoder-only, cross) sees all kv_len(i) keys.
//
// Scores: s = scale * <q, k>; if soft_cap > 0: s = soft_cap * tanh(s / soft_cap).
// Softmax over the visible keys; with sinks, sinks[h] (a logit, already in score units,
// not scaled) joins the denominator and contributes no value:
//   out = sum_k exp(s_k - m) v_k / (exp(sink - m) + sum_k exp(s_k - m)).
// A query that sees no key and has no sink writes zeros.
//
// MLA (absorbed form) is this same contract with num_kv_heads = 1, head_size =
// kv_lora_rank + rope_dim (e.g. 576), head_size_v = kv_lora_rank (512) and v_cache ==
// k_cache with the same strides: V is the first head_size_v elements of the latent vector,
// written once with k_scale, so an MLA kernel must read V with v_scale == k_scale.

#include <cstdint>

#include "attnkit/core/enums.h"
#include "attnkit/export.h"
#include "attnkit/kernels/mask.h"

namespace attnkit {

struct ATTNKIT_API PagedAttentionParams {
  // --- Queries and output (compute dtype: fp32, fp16 or bf16) -------------------------
  // q:   [num_tokens, num_heads, head_size]   element (t, h, d) at q + t*q_token_stride
  //                                            + h*q_head_stride + d
  // out: [num_tokens, num_heads, head_size_v] element (t, h, d) at out + t*o_token_stride
  //                                            + h*o_head_stride + d
  const void* q = nullptr;
  void* out = nullptr;
  ScalarType q_dtype = ScalarType::kFloat32;  // dtype of q and out
  int64_t q_token_stride = 0, q_head_stride = 0;
  int64_t o_token_stride = 0, o_head_stride = 0;

  // --- Keys and values --------------------------------------------------------------
  // Paged mode (block_table != nullptr): key position k of request i lives in physical
  // block b = block_table[i * block_table_stride + k / block_size], slot r = k % block_size:
  //   k_cache + b*k_block_stride + r*k_token_stride + kv_head*k_head_stride + d
  // (NHD and HND layouts differ only in these strides; d is always stride 1).
  // Contiguous mode (block_table == nullptr, kv_start_loc != nullptr): key position k of
  // request i is row kv_start_loc[i] + k of a [rows, num_kv_heads, head_size] tensor:
  //   k_cache + (kv_start_loc[i] + k)*k_token_stride + kv_head*k_head_stride + d
  // (encoder-only attention runs this way over the fresh K/V, with no cache).
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  ScalarType kv_dtype = ScalarType::kFloat32;  // storage dtype of k_cache / v_cache
  float k_scale = 1.0f, v_scale = 1.0f;        // fp8 dequantisation scales (1 otherwise)
  int64_t k_block_stride = 0, k_token_stride = 0, k_head_stride = 0;
  int64_t v_block_stride = 0, v_token_stride = 0, v_head_stride = 0;

  // --- Batch description --------------------------------------------------------------
  int num_seqs = 0;
  const int32_t* query_start_loc = nullptr;  // [num_seqs + 1], query_start_loc[0] = 0
  const int32_t* seq_lens = nullptr;         // [num_seqs], keys each request attends over
  const int32_t* block_table = nullptr;      // [num_seqs, block_table_stride] physical ids
  int block_table_stride = 0;                // row stride of block_table (max blocks/req)
  int block_size = 0;                        // tokens per (kernel) block
  const int32_t* kv_start_loc = nullptr;     // [num_seqs] contiguous mode only

  // --- Shape and features -------------------------------------------------------------
  int num_heads = 0;  // query heads; query head h reads KV head h / (num_heads/num_kv_heads)
  int num_kv_heads = 0;
  int head_size = 0;    // of q and k
  int head_size_v = 0;  // of v and out
  float scale = 1.0f;   // softmax scale applied to <q, k>
  bool causal = true;
  int sliding_window = 0;        // 0 = none
  int chunk_size = 0;            // 0 = none
  float soft_cap = 0.0f;         // 0 = none
  const float* sinks = nullptr;  // [num_heads] sink logits, or nullptr
};

// The layer's visible-keys rule (mask.h) as the params carry it.
#if defined(__CUDACC__)
__host__ __device__ __forceinline__
#else
inline
#endif
    MaskRule
    mask_rule(const PagedAttentionParams& p) {
  return MaskRule{p.causal, p.sliding_window, p.chunk_size};
}

// Writes fresh keys/values into the paged cache (the "cache update"):
// for each token t with slot = slot_mapping[t] >= 0 (negative = padding, skipped):
//   block = slot / block_size, offset = slot % block_size,
//   k_cache[block, offset, h, :] = quantize(key[t, h, :] / k_scale) (through the strides).
struct ATTNKIT_API CacheUpdateParams {
  const void* key = nullptr;    // [num_tokens, num_kv_heads, head_size] compute dtype
  const void* value = nullptr;  // [num_tokens, num_kv_heads, head_size_v]; nullptr = MLA
  ScalarType src_dtype = ScalarType::kFloat32;
  int64_t key_token_stride = 0, key_head_stride = 0;
  int64_t value_token_stride = 0, value_head_stride = 0;
  void* k_cache = nullptr;
  void* v_cache = nullptr;  // nullptr when value is nullptr
  ScalarType kv_dtype = ScalarType::kFloat32;
  float k_scale = 1.0f, v_scale = 1.0f;
  int64_t k_block_stride = 0, k_token_stride = 0, k_head_stride = 0;
  int64_t v_block_stride = 0, v_token_stride = 0, v_head_stride = 0;
  const int64_t* slot_mapping = nullptr;  // [num_tokens]
  int num_tokens = 0;
  int num_kv_heads = 0;
  int head_size = 0;
  int head_size_v = 0;
  int block_size = 0;
};

}  // namespace attnkit
