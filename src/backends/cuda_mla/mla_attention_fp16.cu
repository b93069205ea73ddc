// CUDA_MLA kernel instances for float16 compute (float16 or fp8 e4m3 latent cache).
#include "backends/cuda_mla/mla_launch.cuh"

namespace attnkit::cuda_mla {

void launch_mla_fp16(const PagedAttentionParams& p, const cuda::DevicePlan& plan) {
  launch_mla_compute_dtype<__half>(p, plan);
}

}  // namespace attnkit::cuda_mla
