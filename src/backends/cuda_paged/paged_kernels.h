#pragma once
// Host entry points of CUDA_PAGED's kernels (paged_attention.cu, compiled only when the
// build has CUDA). No CUDA types cross this header.

#include "attnkit/kernels/paged_attention_params.h"
#include "kernels/cuda/device_plan.h"

namespace attnkit::cuda {

// The tile geometry of CUDA_PAGED's kernel (the same for every head size).
KernelGeometry paged_geometry(int head_size);
// CUDA-core kernel, then the split-KV combine when the plan has splits.
void launch_paged_attention(const PagedAttentionParams& params, const DevicePlan& plan);

}  // namespace attnkit::cuda
