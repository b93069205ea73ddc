// CUDA_MLA entry point: checks the shape against what the kernels were built for, runs the
// compute dtype's instances, then merges split-KV partials.
#include <string>

#include "backends/cuda_mla/mla_kernels.h"
#include "backends/cuda_mla/mla_launch.cuh"
#include "kernels/cuda/split_kv_combine.cuh"

namespace attnkit::cuda_mla {

void launch_mla_attention(const PagedAttentionParams& p, const cuda::DevicePlan& plan) {
  if (p.q_dtype != ScalarType::kFloat16 && p.q_dtype != ScalarType::kBFloat16) {
    throw Error(ErrorCode::kUnsupported, "CUDA_MLA: dtype " + std::string(to_string(p.q_dtype)) +
                                             " not supported (supported: float16, bfloat16)");
  }
  if (p.kv_dtype != p.q_dtype && p.kv_dtype != ScalarType::kFp8E4M3) {
    throw Error(ErrorCode::kUnsupported,
                "CUDA_MLA: latent cache dtype " + std::string(to_string(p.kv_dtype)) +
                    " not supported with compute dtype " + std::string(to_string(p.q_dtype)) +
                    " (supported: the compute dtype, fp8_e4m3)");
  }
  if (p.num_kv_heads != 1 || p.head_size != kMlaLatentDim || p.head_size_v != kMlaValueDim ||
      p.k_cache != p.v_cache || p.sinks != nullptr || p.soft_cap > 0.0f || p.chunk_size > 0) {
    throw Error(ErrorCode::kUnsupported,
                "CUDA_MLA runs one latent KV head of 576 (V = its first 512 values), without "
                "sinks, soft-capping or chunked-local attention; got num_kv_heads " +
                    std::to_string(p.num_kv_heads) + ", head_size " + std::to_string(p.head_size) +
                    ", head_size_v " + std::to_string(p.head_size_v));
  }
  if (p.q_dtype == ScalarType::kFloat16) {
    launch_mla_fp16(p, plan);
    cuda::launch_split_kv_combine<__half>(p, plan);
  } else {
    launch_mla_bf16(p, plan);
    cuda::launch_split_kv_combine<__nv_bfloat16>(p, plan);
  }
}

}  // namespace attnkit::cuda_mla
