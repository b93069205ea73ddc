#pragma once
// The CUDA backends' metadata builder and plan. build() runs once per step per KV-cache
// group: it plans the work partition (cuda_plan.h) and uploads, in ONE host->device copy,
// everything the kernels read, into persistent grow-only device buffers:
//
//   metadata buffer (each section 16-byte aligned, in this order):
//     query_start_loc int32[B+1] | seq_lens int32[B] | block_table int32[B * max_blocks]
//     | slot_mapping int64[T] | small items | large items | combine items
//     | split counters uint32[split groups * num_kv_heads] (zeros; the only section the
//       kernels write, and they leave it zero)
//   workspace buffer: partial_o fp32[slots, num_heads, head_size_v] | partial_lse fp32[slots,
//     num_heads]
//
// forward() then only launches kernels (no allocation, no host->device copy).

#include <memory>

#include "attnkit/backend/backend.h"
#include "backends/cuda/cuda_kernels.h"
#include "kernels/cuda/cuda_plan.h"

namespace attnkit::cuda {

enum class KernelFamily { kPaged, kFlash };

class CudaMetadata final : public AttentionMetadata {
 public:
  const CommonAttentionMetadata& common() const override { return *common_; }

  const CommonAttentionMetadata* common_ = nullptr;
  CudaPlan plan;
  DevicePlan device;  // device pointers into the builder's buffers
  const int32_t* query_start_loc = nullptr;
  const int32_t* seq_lens = nullptr;
  const int32_t* block_table = nullptr;
  const int64_t* slot_mapping = nullptr;
  bool causal = true;
};

// Geometry the planner follows for a backend's kernels.
PlanShape plan_shape_for(KernelFamily family, const AttentionLayerParams& layer, int num_sms);

// Makes the builder (CUDA builds only; elsewhere throws Error(kUnsupported)).
std::unique_ptr<MetadataBuilder> make_cuda_metadata_builder(KernelFamily family,
                                                            const AttentionLayerParams& layer);

}  // namespace attnkit::cuda
