#pragma once
// CUDA_MLA's metadata builder and plan. build() runs once per step per KV-cache group: it
// plans the work (cuda_mla_plan.h) and uploads, in ONE host->device copy, everything the
// kernels read into a persistent grow-only device buffer:
//
// (kernels/cuda/plan_upload.h), asynchronously on the context's stream; partial_o holds
// fp32[slots, num_heads, 512]. After reserve(), build() allocates nothing (core/execution.h).
//
// forward() then only launches kernels on the context's stream: no allocation and no
// copy, so a step can be captured in a CUDA graph.

#include <memory>

#include "attnkit/backend/backend.h"
#include "kernels/cuda/cuda_plan.h"
#include "kernels/cuda/device_plan.h"
#include "kernels/cuda/plan_upload.h"

namespace attnkit::cuda_mla {

class CudaMlaMetadata final : public AttentionMetadata {
 public:
  const CommonAttentionMetadata& common() const override { return *common_; }

  const CommonAttentionMetadata* common_ = nullptr;
  cuda::CudaPlan plan;
  cuda::UploadedStep step;  // device pointers into the builder's buffers
  bool causal = true;
};

// CUDA builds only; elsewhere throws Error(kUnsupported, "... not built into this binary").
std::unique_ptr<MetadataBuilder> make_cuda_mla_builder(const AttentionLayerParams& layer);

}  // namespace attnkit::cuda_mla
