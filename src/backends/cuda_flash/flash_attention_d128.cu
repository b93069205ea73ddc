// CUDA_FLASH kernels for head size 128 (both dtypes, decode and prefill tiles).
#include "backends/cuda_flash/flash_launch.cuh"

namespace attnkit::cuda {

void launch_flash_d128(const PagedAttentionParams& p, const DevicePlan& plan,
                       const FlashLaunchOptions& options) {
  launch_flash_head_size<128>(p, plan, options);
}

}  // namespace attnkit::cuda
