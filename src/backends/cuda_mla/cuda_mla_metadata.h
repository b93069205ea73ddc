#pragma once
// CUDA_MLA's metadata builder and plan. build() runs once per step per KV-cache group: it
// plans the work (cuda_mla_plan.h) and uploads, in ONE host->device copy, everything the
// kernels read into a persistent grow-only device buffer:
//
//   metadata buffer (each section 16-byte aligned, in this order):
//     query_start_loc int32[B+1] | seq_lens int32[B] | block_table int32[B * max_blocks]
//     | slot_mapping int64[T] | small items | large items | combine items
//   workspace buffer: partial_o fp32[slots, num_heads, 512] | partial_lse fp32[slots,
//     num_heads]
//
// forward() then only launches kernels: no allocation and no host->device copy, so a
// step can be captured in a CUDA graph.

#include <memory>

#include "attnkit/backend/backend.h"
#include "kernels/cuda/cuda_plan.h"
#include "kernels/cuda/device_plan.h"

namespace attnkit::cuda_mla {

class CudaMlaMetadata final : public AttentionMetadata {
 public:
  const CommonAttentionMetadata& common() const override { return *common_; }

  const CommonAttentionMetadata* common_ = nullptr;
  cuda::CudaPlan plan;
  cuda::DevicePlan device;  // device pointers into the builder's buffers
  const int32_t* query_start_loc = nullptr;
  const int32_t* seq_lens = nullptr;
  const int32_t* block_table = nullptr;
  const int64_t* slot_mapping = nullptr;  // nullptr when the step writes no latent row
  bool causal = true;
};

// CUDA builds only; elsewhere throws Error(kUnsupported, "... not built into this binary").
std::unique_ptr<MetadataBuilder> make_cuda_mla_builder(const AttentionLayerParams& layer);

}  // namespace attnkit::cuda_mla
