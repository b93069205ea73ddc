#pragma once
// Tile configurations of CUDA_FLASH per head size, and the launch of one work list.
// Shared-memory sizes (bytes) are chosen so that prefill runs 2 CTAs per SM (96 KiB each)
// and decode keeps 2-3 tiles of K/V in flight per SM; see flash_kernel.cuh for layouts.

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/flash_kernel.cuh"

namespace attnkit::cuda {

//                                     D   WM WARPS_M WARPS_N BN STAGES
template <int D>
struct FlashLargeConfig;
template <>
struct FlashLargeConfig<64> {
  using type = FlashConfig<64, 2, 4, 1, 64, 3>;
};
template <>
struct FlashLargeConfig<128> {
  using type = FlashConfig<128, 2, 4, 1, 32, 3>;
};
template <>
struct FlashLargeConfig<256> {
  using type = FlashConfig<256, 1, 4, 1, 32, 2>;
};
template <int D>
struct FlashSmallConfig;
template <>
struct FlashSmallConfig<64> {
  using type = FlashConfig<64, 1, 1, 4, 64, 3>;
};
template <>
struct FlashSmallConfig<128> {
  using type = FlashConfig<128, 1, 1, 4, 64, 3>;
};
template <>
struct FlashSmallConfig<256> {
  using type = FlashConfig<256, 1, 1, 4, 64, 2>;
};

template <typename T, typename C>
void launch_flash_items(const PagedAttentionParams& p, const CudaWorkItem* items, int count,
                        const DevicePlan& plan) {
  if (count == 0) return;
  static const bool configured = [] {
    ATTNKIT_CUDA_CHECK(cudaFuncSetAttribute(flash_attention_kernel<T, C>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(C::kSmemBytes)));
    return true;
  }();
  (void)configured;
  flash_attention_kernel<T, C><<<dim3(count, p.num_kv_heads), C::kThreads, C::kSmemBytes>>>(
      p, items, plan.partial_o, plan.partial_lse);
  ATTNKIT_CUDA_CHECK_LAUNCH(flash_attention_kernel);
}

template <int D>
void launch_flash_head_size(const PagedAttentionParams& p, const DevicePlan& plan) {
  if (p.q_dtype == ScalarType::kFloat16) {
    launch_flash_items<__half, typename FlashSmallConfig<D>::type>(p, plan.small_items,
                                                                   plan.num_small, plan);
    launch_flash_items<__half, typename FlashLargeConfig<D>::type>(p, plan.large_items,
                                                                   plan.num_large, plan);
  } else {
    launch_flash_items<__nv_bfloat16, typename FlashSmallConfig<D>::type>(p, plan.small_items,
                                                                          plan.num_small, plan);
    launch_flash_items<__nv_bfloat16, typename FlashLargeConfig<D>::type>(p, plan.large_items,
                                                                          plan.num_large, plan);
  }
}

// Defined in flash_attention_d{64,128,256}.cu (one head size per translation unit keeps
// nvcc's work parallel).
void launch_flash_d64(const PagedAttentionParams& p, const DevicePlan& plan);
void launch_flash_d128(const PagedAttentionParams& p, const DevicePlan& plan);
void launch_flash_d256(const PagedAttentionParams& p, const DevicePlan& plan);

}  // namespace attnkit::cuda
