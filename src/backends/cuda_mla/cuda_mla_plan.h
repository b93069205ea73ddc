#pragma once
// CUDA_MLA's per-step planning, in plain C++ (unit-tested without a GPU). The work
// partition is CUDA_FLASH's planner (kernels/cuda/cuda_plan.h) with one KV head, so a
// request's rows are its (token, head) pairs: decode of H heads gives H rows per request,
// packed 16 (small-row kernel) or 64 (large-row kernel) to a CTA, and long key ranges are
// split (split-KV) until the grid covers the GPU.

#include <cstddef>

#include "attnkit/backend/backend.h"
#include "kernels/cuda/cuda_plan.h"

namespace attnkit::cuda_mla {

// The planner's view of CUDA_MLA's kernels (mla_geometry.h) on a GPU with `num_sms`
// multiprocessors.
cuda::PlanShape mla_plan_shape(const AttentionLayerParams& layer, int num_sms);

// Validates `common` (array sizes, offsets, queries within their sequences, a block table
// wide enough for every sequence) and plans the step, choosing the split-KV grid with the
// best wave_efficiency(). Throws Error(kInvalidArgument)
// naming the bad field.
// `bounds` carries the reserved workspace's partial slots and, for a graph-shaped plan, the
// fixed split count (PlanShape::max_partial_slots, fixed_splits; 0 = none).
struct MlaPlanBounds {
  int fixed_splits = 0;
  int max_partial_slots = 0;
};
cuda::CudaPlan plan_mla_step(const AttentionLayerParams& layer,
                             const CommonAttentionMetadata& common, int num_sms,
                             const MlaPlanBounds& bounds = {});

// The fraction of the CTA slots of the plan's waves that hold a CTA (1 = every wave full),
// with small-row CTAs two to an SM and large-row CTAs one (their shared memory on sm_90).
double wave_efficiency(const cuda::CudaPlan& plan, int num_sms);

}  // namespace attnkit::cuda_mla
