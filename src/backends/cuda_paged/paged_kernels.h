#pragma once
// Host entry points of CUDA_PAGED's kernels (paged_attention.cu, compiled only when the
// build has CUDA). No CUDA types cross this header.

#include "attnkit/kernels/paged_attention_params.h"
#include "kernels/cuda/device_plan.h"

namespace attnkit::cuda {

// Packed rows per CTA: 8 where a KV head has more than 4 query heads over a 16-bit cache
// whose rows (head_size elements) are at most 256 bytes, so that one CTA reads each K/V
// row once for up to 8 of its heads; else 4 (with longer rows, 8 rows of fp32 queries and
// the stages would not leave four CTAs an SM; fp8's conversions spill with 8). The
// planner's rows (paged_geometry) and the kernel launched (paged_attention.cu) both come
// from here.
constexpr int paged_rows_per_cta(int head_size, int kv_bytes, int group) {
  return group > 4 && kv_bytes == 2 && head_size * kv_bytes <= 256 ? 8 : 4;
}

// The tile geometry of CUDA_PAGED's kernel for a layer's head size, cache element size
// (1 or 2 bytes) and query heads per KV head.
KernelGeometry paged_geometry(int head_size, int kv_bytes, int group);
// CUDA-core kernel, then the split-KV combine when the plan has splits.
void launch_paged_attention(const PagedAttentionParams& params, const DevicePlan& plan);

}  // namespace attnkit::cuda
