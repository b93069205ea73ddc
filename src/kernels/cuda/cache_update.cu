// The cache update: writes this step's fresh keys/values into the paged cache at the slot
// mapping (CacheUpdateParams contract), converting to the cache dtype (fp8 with a scale).
// Memory-bound: one CTA per token, threads over heads x dims. When every row starts on an
// 8-element boundary (head sizes, strides, 16-byte aligned tensors: the usual case) each
// thread moves 8 elements with 16-byte loads and stores (cache_update_vec_kernel); other
// shapes take the element-wise kernel. Both round identically (x / scale, then the
// cache dtype's round-to-nearest).

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/device_plan.h"
#include "kernels/cuda/kernel_launch.cuh"

namespace attnkit::cuda {
namespace {

__device__ float load_element(const void* base, ScalarType type, int64_t i) {
  switch (type) {
    case ScalarType::kFloat16:
      return __half2float(static_cast<const __half*>(base)[i]);
    case ScalarType::kBFloat16:
      return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
    default:
      return static_cast<const float*>(base)[i];
  }
}

__device__ void store_element(void* base, ScalarType type, int64_t i, float v) {
  switch (type) {
    case ScalarType::kFloat16:
      static_cast<__half*>(base)[i] = __float2half_rn(v);
      break;
    case ScalarType::kBFloat16:
      static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(v);
      break;
    case ScalarType::kFp8E4M3:
      // Saturating round-to-nearest-even, as vLLM's scaled fp8 conversion.
      static_cast<__nv_fp8_storage_t*>(base)[i] =
          __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3);
      break;
    case ScalarType::kFp8E5M2:
      static_cast<__nv_fp8_storage_t*>(base)[i] =
          __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E5M2);
      break;
    default:
      static_cast<float*>(base)[i] = v;
      break;
  }
}

__global__ void cache_update_kernel(CacheUpdateParams p) {
  // The attention launch behind this one may start its CTAs (and their reads of the work
  // items and block table) now; it waits for this grid before reading the cache.
  let_next_grid_start();
  const int t = blockIdx.x;
  const int64_t slot = p.slot_mapping[t];
  if (slot < 0) return;  // padding token
  const int64_t block = slot / p.block_size;
  const int64_t offset = slot % p.block_size;
  const float inv_k = 1.0f / p.k_scale;
  const float inv_v = 1.0f / p.v_scale;
  const int k_elems = p.num_kv_heads * p.head_size;
  for (int i = threadIdx.x; i < k_elems; i += blockDim.x) {
    const int h = i / p.head_size, d = i % p.head_size;
    const float x =
        load_element(p.key, p.src_dtype, t * p.key_token_stride + h * p.key_head_stride + d);
    store_element(p.k_cache, p.kv_dtype,
                  block * p.k_block_stride + offset * p.k_token_stride + h * p.k_head_stride + d,
                  x * inv_k);
  }
  if (p.value == nullptr) return;  // MLA: V is a prefix of the latent key
  const int v_elems = p.num_kv_heads * p.head_size_v;
  for (int i = threadIdx.x; i < v_elems; i += blockDim.x) {
    const int h = i / p.head_size_v, d = i % p.head_size_v;
    const float x =
        load_element(p.value, p.src_dtype, t * p.value_token_stride + h * p.value_head_stride + d);
    store_element(p.v_cache, p.kv_dtype,
                  block * p.v_block_stride + offset * p.v_token_stride + h * p.v_head_stride + d,
                  x * inv_v);
  }
}

// Eight consecutive elements as floats / from floats, with the widest accesses the types
// allow (16 bytes for 16-bit types and fp32 halves, 8 bytes for fp8).
template <typename T>
__device__ __forceinline__ void load8(const T* src, float (&x)[8]) {
  if constexpr (std::is_same_v<T, float>) {
    const float4 a = reinterpret_cast<const float4*>(src)[0];
    const float4 b = reinterpret_cast<const float4*>(src)[1];
    x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
  } else {
    const uint4 raw = *reinterpret_cast<const uint4*>(src);
    const T* e = reinterpret_cast<const T*>(&raw);
#pragma unroll
    for (int i = 0; i < 8; ++i) x[i] = static_cast<float>(e[i]);
  }
}
template <ScalarType kDst>
__device__ __forceinline__ void store8(void* base, int64_t i, const float (&x)[8]) {
  if constexpr (kDst == ScalarType::kFloat32) {
    float4* dst = reinterpret_cast<float4*>(static_cast<float*>(base) + i);
    dst[0] = make_float4(x[0], x[1], x[2], x[3]);
    dst[1] = make_float4(x[4], x[5], x[6], x[7]);
  } else if constexpr (kDst == ScalarType::kFloat16 || kDst == ScalarType::kBFloat16) {
    using T = std::conditional_t<kDst == ScalarType::kFloat16, __half, __nv_bfloat16>;
    uint4 raw;
    T* e = reinterpret_cast<T*>(&raw);
#pragma unroll
    for (int k = 0; k < 8; ++k) e[k] = static_cast<T>(x[k]);  // round to nearest even
    *reinterpret_cast<uint4*>(static_cast<T*>(base) + i) = raw;
  } else {
    constexpr __nv_fp8_interpretation_t kind = kDst == ScalarType::kFp8E4M3 ? __NV_E4M3 : __NV_E5M2;
    uint2 raw;
    auto* e = reinterpret_cast<__nv_fp8_storage_t*>(&raw);
#pragma unroll
    for (int k = 0; k < 8; ++k) e[k] = __nv_cvt_float_to_fp8(x[k], __NV_SATFINITE, kind);
    *reinterpret_cast<uint2*>(static_cast<__nv_fp8_storage_t*>(base) + i) = raw;
  }
}

template <typename Src, ScalarType kDst>
__global__ void cache_update_vec_kernel(CacheUpdateParams p) {
  let_next_grid_start();  // as cache_update_kernel
  const int t = blockIdx.x;
  const int64_t slot = p.slot_mapping[t];
  if (slot < 0) return;  // padding token
  const int64_t block = slot / p.block_size;
  const int64_t offset = slot % p.block_size;
  const Src* key = static_cast<const Src*>(p.key);
  const Src* value = static_cast<const Src*>(p.value);
  const float inv_k = 1.0f / p.k_scale;
  const float inv_v = 1.0f / p.v_scale;
  const int k_chunks = p.head_size / 8;
  const int v_chunks = p.head_size_v / 8;
  const int k_total = p.num_kv_heads * k_chunks;
  const int total = k_total + (value != nullptr ? p.num_kv_heads * v_chunks : 0);
  for (int i = threadIdx.x; i < total; i += blockDim.x) {
    const bool is_key = i < k_total;
    const int j = is_key ? i : i - k_total;
    const int chunks = is_key ? k_chunks : v_chunks;
    const int h = j / chunks, d = (j % chunks) * 8;
    float x[8];
    if (is_key) {
      load8(key + t * p.key_token_stride + h * p.key_head_stride + d, x);
#pragma unroll
      for (int k = 0; k < 8; ++k) x[k] *= inv_k;
      store8<kDst>(p.k_cache,
                   block * p.k_block_stride + offset * p.k_token_stride + h * p.k_head_stride + d,
                   x);
    } else {
      load8(value + t * p.value_token_stride + h * p.value_head_stride + d, x);
#pragma unroll
      for (int k = 0; k < 8; ++k) x[k] *= inv_v;
      store8<kDst>(p.v_cache,
                   block * p.v_block_stride + offset * p.v_token_stride + h * p.v_head_stride + d,
                   x);
    }
  }
}

// Whether the 8-element kernel may run: every row of every tensor starts 16-byte aligned.
bool rows_aligned(const CacheUpdateParams& p) {
  auto aligned = [](const void* ptr) {
    return ptr == nullptr || reinterpret_cast<uintptr_t>(ptr) % 16 == 0;
  };
  const int64_t strides[] = {p.key_token_stride,  p.key_head_stride, p.value_token_stride,
                             p.value_head_stride, p.k_block_stride,  p.k_token_stride,
                             p.k_head_stride,     p.v_block_stride,  p.v_token_stride,
                             p.v_head_stride,     p.head_size,       p.head_size_v};
  for (int64_t s : strides) {
    if (s % 8 != 0) return false;
  }
  return aligned(p.key) && aligned(p.value) && aligned(p.k_cache) && aligned(p.v_cache);
}

template <typename Src, ScalarType kDst>
bool launch_vec_kernel(const CacheUpdateParams& p, cudaStream_t stream) {
  static const bool loaded = load_kernel(cache_update_vec_kernel<Src, kDst>);
  (void)loaded;
  if (p.num_tokens > 0) cache_update_vec_kernel<Src, kDst><<<p.num_tokens, 256, 0, stream>>>(p);
  return true;
}

template <typename Src>
bool launch_vec_for_source(const CacheUpdateParams& p, cudaStream_t stream) {
  switch (p.kv_dtype) {
    case ScalarType::kFloat32:
      return launch_vec_kernel<Src, ScalarType::kFloat32>(p, stream);
    case ScalarType::kFloat16:
      return launch_vec_kernel<Src, ScalarType::kFloat16>(p, stream);
    case ScalarType::kBFloat16:
      return launch_vec_kernel<Src, ScalarType::kBFloat16>(p, stream);
    case ScalarType::kFp8E4M3:
      return launch_vec_kernel<Src, ScalarType::kFp8E4M3>(p, stream);
    case ScalarType::kFp8E5M2:
      return launch_vec_kernel<Src, ScalarType::kFp8E5M2>(p, stream);
    default:
      return false;
  }
}

bool launch_vec(const CacheUpdateParams& p, cudaStream_t stream) {
  if (!rows_aligned(p)) return false;
  switch (p.src_dtype) {
    case ScalarType::kFloat32:
      return launch_vec_for_source<float>(p, stream);
    case ScalarType::kFloat16:
      return launch_vec_for_source<__half>(p, stream);
    case ScalarType::kBFloat16:
      return launch_vec_for_source<__nv_bfloat16>(p, stream);
    default:
      return false;
  }
}

}  // namespace

void launch_cache_update(const CacheUpdateParams& params, void* stream_ptr) {
  // num_tokens 0 loads both kernels of these dtypes (without rows, the vectorised one
  // counts as aligned) and launches neither.
  static const bool loaded = load_kernel(cache_update_kernel);
  (void)loaded;
  const auto stream = static_cast<cudaStream_t>(stream_ptr);
  if (launch_vec(params, stream)) {
    if (params.num_tokens > 0) ATTNKIT_CUDA_CHECK_LAUNCH(cache_update_vec_kernel);
    return;
  }
  if (params.num_tokens <= 0) return;
  cache_update_kernel<<<params.num_tokens, 256, 0, stream>>>(params);
  ATTNKIT_CUDA_CHECK_LAUNCH(cache_update_kernel);
}

int current_device_sm_count() {
  int device = 0;
  ATTNKIT_CUDA_CHECK(cudaGetDevice(&device));
  int count = 0;
  ATTNKIT_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  return count;
}

}  // namespace attnkit::cuda
