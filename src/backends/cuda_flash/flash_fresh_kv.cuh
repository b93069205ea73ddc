#pragma once
// The cache write CUDA_FLASH folds into its attention launches (can_fold_cache_update):
// one 16-byte chunk of a new token's key and value rows copied from the step's inputs into
// the token's cache slot. The cache holds the compute dtype and the scales are 1 (checked
// on the host), so the copy is bit for bit.

#include <cstdint>

#include "attnkit/kernels/paged_attention_params.h"

namespace attnkit::cuda {

// Chunk c (elements 8c .. 8c + 7) of `token`'s key and value rows of `kv_head` into the
// cache slot slot_mapping[token]; padding tokens (negative slots) are skipped.
template <typename T>
__device__ __forceinline__ void copy_fresh_chunk(const CacheUpdateParams& fresh, int token,
                                                 int kv_head, int c) {
  const int64_t slot = fresh.slot_mapping[token];
  if (slot < 0) return;
  const int64_t block = slot / fresh.block_size, offset = slot % fresh.block_size;
  const uint4 k = *reinterpret_cast<const uint4*>(static_cast<const T*>(fresh.key) +
                                                  token * fresh.key_token_stride +
                                                  kv_head * fresh.key_head_stride + c * 8);
  const uint4 v = *reinterpret_cast<const uint4*>(static_cast<const T*>(fresh.value) +
                                                  token * fresh.value_token_stride +
                                                  kv_head * fresh.value_head_stride + c * 8);
  *reinterpret_cast<uint4*>(static_cast<T*>(fresh.k_cache) + block * fresh.k_block_stride +
                            offset * fresh.k_token_stride + kv_head * fresh.k_head_stride + c * 8) =
      k;
  *reinterpret_cast<uint4*>(static_cast<T*>(fresh.v_cache) + block * fresh.v_block_stride +
                            offset * fresh.v_token_stride + kv_head * fresh.v_head_stride + c * 8) =
      v;
}

}  // namespace attnkit::cuda
