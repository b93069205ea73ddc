// The cache update: writes this step's fresh keys/values into the paged cache at the slot
// mapping (CacheUpdateParams contract), converting to the cache dtype (fp8 with a scale).
// Memory-bound and small next to attention: one CTA per token, threads over heads x dims.

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/cuda_kernels.h"

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
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Lets a programmatically dependent attention launch start its CTAs (and their reads of
  // Q and the block table) now; it waits for this grid's completion before reading the
  // cache (wait_for_previous_grid), so the trigger's position does not matter for safety.
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
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

}  // namespace

void launch_cache_update(const CacheUpdateParams& params) {
  if (params.num_tokens <= 0) return;
  cache_update_kernel<<<params.num_tokens, 256>>>(params);
  ATTNKIT_CUDA_CHECK_LAUNCH(cache_update_kernel);
}

}  // namespace attnkit::cuda
