#pragma once
// Host entry points of CUDA_MLA's kernels (defined in the .cu files, compiled only when the
// build has CUDA). No CUDA types cross this header.

#include "attnkit/kernels/paged_attention_params.h"
#include "kernels/cuda/device_plan.h"

namespace attnkit::cuda_mla {

// Runs the plan's small-row and large-row items, then the split-KV combine. `params`
// follows the MLA contract (num_kv_heads 1, head_size 576, head_size_v 512, v_cache ==
// k_cache); q/out in float16 or bfloat16, the latent cache in the compute dtype or fp8
// e4m3. Throws Error(kUnsupported) for anything else (the capabilities never allow it).
void launch_mla_attention(const PagedAttentionParams& params, const cuda::DevicePlan& plan);

}  // namespace attnkit::cuda_mla
