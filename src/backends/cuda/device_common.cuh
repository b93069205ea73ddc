#pragma once
// Device helpers shared by the CUDA kernels: element conversions, K/V addressing over the
// paged or contiguous layout, and the visibility rule of the kernel contract.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "attnkit/kernels/paged_attention_params.h"

namespace attnkit::cuda {

inline constexpr float kLog2e = 1.4426950408889634f;

template <typename T>
__device__ __forceinline__ float to_float(T v);
template <>
__device__ __forceinline__ float to_float<__half>(__half v) {
  return __half2float(v);
}
template <>
__device__ __forceinline__ float to_float<__nv_bfloat16>(__nv_bfloat16 v) {
  return __bfloat162float(v);
}

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// Two floats rounded to T and packed into one 32-bit register (low half = a).
template <typename T>
__device__ __forceinline__ uint32_t pack2(float a, float b) {
  const T lo = from_float<T>(a);
  const T hi = from_float<T>(b);
  return static_cast<uint32_t>(__builtin_bit_cast(uint16_t, lo)) |
         (static_cast<uint32_t>(__builtin_bit_cast(uint16_t, hi)) << 16);
}

// Element offset of key position `kpos` of request `seq` (token part only; add the head
// and dimension offsets). Paged: through the block table; contiguous: kv_start_loc row.
__device__ __forceinline__ int64_t kv_token_offset(const PagedAttentionParams& p, int seq, int kpos,
                                                   int64_t block_stride, int64_t token_stride) {
  if (p.block_table != nullptr) {
    const int block =
        p.block_table[static_cast<int64_t>(seq) * p.block_table_stride + kpos / p.block_size];
    return block * block_stride + static_cast<int64_t>(kpos % p.block_size) * token_stride;
  }
  return static_cast<int64_t>(p.kv_start_loc[seq] + kpos) * token_stride;
}

// Whether query position `pos` sees key position `key` (key already < kv_len).
__device__ __forceinline__ bool key_visible(const PagedAttentionParams& p, int pos, int key) {
  if (!p.causal) return true;
  if (key > pos) return false;
  if (p.sliding_window > 0 && key <= pos - p.sliding_window) return false;
  if (p.chunk_size > 0 && key / p.chunk_size != pos / p.chunk_size) return false;
  return true;
}

// Score in log2 units: scale, optional soft-cap, times log2(e).
__device__ __forceinline__ float score_log2(const PagedAttentionParams& p, float dot) {
  float s = dot * p.scale;
  if (p.soft_cap > 0.0f) s = p.soft_cap * tanhf(s / p.soft_cap);
  return s * kLog2e;
}

// exp2(x - m) where x = -inf (no keys) gives weight 0 even when m is -inf too (never NaN).
__device__ __forceinline__ float safe_exp2(float x, float m) {
  return x == -INFINITY ? 0.0f : exp2f(x - m);
}

}  // namespace attnkit::cuda
