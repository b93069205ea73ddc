#pragma once
// Device helpers shared by the CUDA kernels: element conversions, K/V addressing over the
// paged or contiguous layout, and the visibility rule of the kernel contract.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

#include "attnkit/kernels/paged_attention_params.h"
#include "kernels/cuda/fast_divmod.h"

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

// Two floats rounded to T and packed into one 32-bit register (low half = a): one
// cvt.rn.{f16x2,bf16x2}.f32 instruction.
template <typename T>
__device__ __forceinline__ uint32_t pack2(float a, float b) {
  if constexpr (std::is_same_v<T, __half>) {
    __half2 h = __floats2half2_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&h);
  } else {
    __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
    return *reinterpret_cast<const uint32_t*>(&h);
  }
}

// The inverse of pack2: the two T of a 32-bit register as floats (low half first).
template <typename T>
__device__ __forceinline__ float2 unpack2(uint32_t v) {
  if constexpr (std::is_same_v<T, __half>) {
    return __half22float2(*reinterpret_cast<const __half2*>(&v));
  } else {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v));
  }
}

// Element offset of key position `kpos` of request `seq` (token part only; add the head
// and dimension offsets). Paged: through the block table (`block_div` divides by
// p.block_size); contiguous: kv_start_loc row.
__device__ __forceinline__ int64_t kv_token_offset(const PagedAttentionParams& p,
                                                   const FastDivmod& block_div, int seq, int kpos,
                                                   int64_t block_stride, int64_t token_stride) {
  if (p.block_table != nullptr) {
    const int index = block_div.quotient(kpos);
    const int block = p.block_table[static_cast<int64_t>(seq) * p.block_table_stride + index];
    return block * block_stride +
           static_cast<int64_t>(block_div.remainder(kpos, index)) * token_stride;
  }
  return static_cast<int64_t>(p.kv_start_loc[seq] + kpos) * token_stride;
}

// Whether query position `pos` sees key position `key` (key already < kv_len): mask.h's
// rule.
__device__ __forceinline__ bool key_visible(const PagedAttentionParams& p, int pos, int key) {
  return attnkit::key_visible(mask_rule(p), pos, key);
}

// The keys [lo, hi] that query position `pos` sees among kv_end: mask.h's visible_keys as
// the closed interval the kernels mask with (two compares per key instead of divisions);
// lo > hi when it sees none.
struct KeyWindow {
  int lo;
  int hi;
};
__device__ __forceinline__ KeyWindow visible_keys(const PagedAttentionParams& p, int pos,
                                                  int kv_end) {
  const KeySpan span = attnkit::visible_keys(mask_rule(p), pos, kv_end);
  return {span.begin, span.end - 1};
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

// Programmatic dependent launch (sm_90+): blocks until the grid this one was launched
// behind has completed and its writes are visible. Without such a dependency (a plain
// launch, or an sm_80 build) it returns at once.
__device__ __forceinline__ void wait_for_previous_grid() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Programmatic dependent launch (sm_90+): lets the next grid of the stream, when it was
// launched programmatically, start its CTAs as soon as every CTA of this grid has called
// this (or exited). Safe anywhere: that grid still waits for this one's completion
// (wait_for_previous_grid) before it reads or writes anything this grid touches.
__device__ __forceinline__ void let_next_grid_start() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace attnkit::cuda
