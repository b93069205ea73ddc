#pragma once
// Launch of CUDA_MLA's kernel instances: one per (compute dtype, cache dtype, tile
// configuration); the two compute dtypes live in separate translation units so that nvcc
// compiles them in parallel.

#include "backends/cuda_mla/mla_config_choice.h"
#include "backends/cuda_mla/mla_kernel.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernel_launch.cuh"

namespace attnkit::cuda_mla {

template <typename T, typename KV, typename C>
void launch_mla_items(const PagedAttentionParams& p, const CudaWorkItem* items, int count,
                      const cuda::DevicePlan& plan) {
  static const bool configured =
      cuda::allow_dynamic_smem(mla_attention_kernel<T, KV, C>, C::kSmemBytes);
  (void)configured;
  if (count == 0) return;  // and DevicePlan::load_only: loaded above
  mla_attention_kernel<T, KV, C>
      <<<count, kThreads, C::kSmemBytes, static_cast<cudaStream_t>(plan.stream)>>>(
          p, items, plan.partial_o, plan.partial_lse);
  ATTNKIT_CUDA_CHECK_LAUNCH(mla_attention_kernel);
}

// Whether the current device lets a CTA opt into MlaLargeSm90Config's shared memory (asked
// per launch: a process may drive GPUs of different architectures).
inline bool device_holds_sm90_config() {
  int device = 0, optin = 0;
  ATTNKIT_CUDA_CHECK(cudaGetDevice(&device));
  ATTNKIT_CUDA_CHECK(
      cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return static_cast<size_t>(optin) >= MlaLargeSm90Config::kSmemBytes;
}

template <typename T, typename KV>
void launch_mla_cache_dtype(const PagedAttentionParams& p, const cuda::DevicePlan& plan) {
  launch_mla_items<T, KV, MlaSmallConfig>(p, plan.small_items, plan.num_small, plan);
  if (plan.num_large == 0 && !plan.load_only) return;
  if (large_row_config() == LargeRowConfig::kAuto && device_holds_sm90_config()) {
    launch_mla_items<T, KV, MlaLargeSm90Config>(p, plan.large_items, plan.num_large, plan);
  } else {
    launch_mla_items<T, KV, MlaLargeConfig>(p, plan.large_items, plan.num_large, plan);
  }
}

template <typename T>
void launch_mla_compute_dtype(const PagedAttentionParams& p, const cuda::DevicePlan& plan) {
  if (p.kv_dtype == ScalarType::kFp8E4M3) {
    launch_mla_cache_dtype<T, Fp8E4M3>(p, plan);
  } else {
    launch_mla_cache_dtype<T, T>(p, plan);
  }
}

// Defined in mla_attention_fp16.cu and mla_attention_bf16.cu.
void launch_mla_fp16(const PagedAttentionParams& p, const cuda::DevicePlan& plan);
void launch_mla_bf16(const PagedAttentionParams& p, const cuda::DevicePlan& plan);

}  // namespace attnkit::cuda_mla
