// CUDA_MLA kernel instances for bfloat16 compute (bfloat16 or fp8 e4m3 latent cache).
#include "backends/cuda_mla/mla_launch.cuh"

namespace attnkit::cuda_mla {

void launch_mla_bf16(const PagedAttentionParams& p, const cuda::DevicePlan& plan) {
  launch_mla_compute_dtype<__nv_bfloat16>(p, plan);
}

}  // namespace attnkit::cuda_mla
