// CUDA_FLASH's Hopper prefill kernels (flash_wgmma_kernel.cuh). This file alone is
// compiled for sm_90a (wgmma and setmaxnreg exist only there), see src/CMakeLists.txt.
#include <cstdlib>
#include <cstring>
#include <string>

#include "attnkit/core/options.h"
#include "backends/cuda_flash/flash_wgmma.h"
#include "backends/cuda_flash/flash_wgmma_kernel.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernel_launch.cuh"

namespace attnkit::cuda {
namespace {

// Tiles per head size; shared memory from the configuration, no spills (`nvcc -Xptxas -v`,
// sm_90a). ATTNKIT_FLASH_WGMMA_D{64,128,256} (template arguments, e.g. through a
// pre-included header) replace one in the alternative builds bench/cuda_device_run.sh
// measures.
#ifndef ATTNKIT_FLASH_WGMMA_D64
#define ATTNKIT_FLASH_WGMMA_D64 64, 128, 4, true
#endif
#ifndef ATTNKIT_FLASH_WGMMA_D128
#define ATTNKIT_FLASH_WGMMA_D128 128, 128, 3, true
#endif
#ifndef ATTNKIT_FLASH_WGMMA_D256
#define ATTNKIT_FLASH_WGMMA_D256 256, 64, 2, true
#endif
template <int D>
struct WgmmaTiles;
template <>
struct WgmmaTiles<64> {  // 145 KiB shared
  using type = WgmmaFlashConfig<ATTNKIT_FLASH_WGMMA_D64>;
};
template <>
struct WgmmaTiles<128> {  // 225 KiB shared
  using type = WgmmaFlashConfig<ATTNKIT_FLASH_WGMMA_D128>;
};
template <>
struct WgmmaTiles<256> {  // 193 KiB shared
  using type = WgmmaFlashConfig<ATTNKIT_FLASH_WGMMA_D256>;
};

template <int D, typename T>
void launch_typed(const PagedAttentionParams& p, const CudaWorkItem* items, int count,
                  const DevicePlan& plan) {
  using C = typename WgmmaTiles<D>::type;
  static const bool configured = allow_dynamic_smem(flash_wgmma_kernel<T, C>, C::kSmemBytes);
  (void)configured;
  if (count == 0) return;  // and DevicePlan::load_only: loaded above
  flash_trace_bind();      // the split merge's marks; nothing unless built with ATTNKIT_FLASH_TRACE
  launch_kernel_ex(flash_wgmma_kernel<T, C>, dim3(count, p.num_kv_heads), dim3(C::kThreads),
                   C::kSmemBytes, static_cast<cudaStream_t>(plan.stream), /*programmatic=*/true, p,
                   items, plan.partial_o, plan.partial_lse, plan.split_counters);
  ATTNKIT_CUDA_CHECK_LAUNCH(flash_wgmma_kernel);
}

template <int D>
void launch_head_size(const PagedAttentionParams& p, const CudaWorkItem* items, int count,
                      const DevicePlan& plan) {
  if (p.q_dtype == ScalarType::kFloat16) {
    launch_typed<D, __half>(p, items, count, plan);
  } else {
    launch_typed<D, __nv_bfloat16>(p, items, count, plan);
  }
}

}  // namespace

bool flash_wgmma_enabled() {
  static const bool enabled = [] {
    if (option_switch(Option::kCudaFlashWgmma) == false) return false;
    int device = 0, major = 0, minor = 0;
    ATTNKIT_CUDA_CHECK(cudaGetDevice(&device));
    ATTNKIT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    ATTNKIT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    if (major != 9 || minor != 0) return false;
    // The sm_90a image must load on this device (it does on every 9.0 device; asked
    // rather than assumed).
    cudaFuncAttributes attributes{};
    const cudaError_t status = cudaFuncGetAttributes(
        &attributes, flash_wgmma_kernel<__nv_bfloat16, WgmmaTiles<128>::type>);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return true;
  }();
  return enabled;
}

void launch_flash_wgmma_items(const PagedAttentionParams& p, const CudaWorkItem* items, int count,
                              const DevicePlan& plan) {
  if (count == 0 && !plan.load_only) return;
  switch (p.head_size) {
    case 64:
      launch_head_size<64>(p, items, count, plan);
      break;
    case 128:
      launch_head_size<128>(p, items, count, plan);
      break;
    case 256:
      launch_head_size<256>(p, items, count, plan);
      break;
    default:
      throw Error(ErrorCode::kUnsupported, "CUDA_FLASH (sm_90a): head_size " +
                                               std::to_string(p.head_size) +
                                               " not supported (supported: 64, 128, 256)");
  }
}

}  // namespace attnkit::cuda
