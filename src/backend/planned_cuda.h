#pragma once
// The metadata builder and implementation of the CUDA backends whose kernels run over the
// CUDA work planner (kernels/cuda/cuda_plan.h): CUDA_FLASH and CUDA_PAGED. Each of those
// leaves passes what differs between them (a PlannedKernels: its name, its kernels' tile
// geometry and its launch) and gets the protocol's two objects; the protocol layer holds
// them so that no backend includes another backend's folder.
//
// build() runs once per step per KV-cache group: it plans the work partition and uploads,
// in ONE asynchronous host->device copy on the context's stream, everything the kernels
// read (kernels/cuda/plan_upload.h). forward() checks the tensors, fills
// PagedAttentionParams and launches on the context's stream (no allocation, no copy). After
// reserve(), build() allocates nothing either (core/execution.h).

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "attnkit/backend/backend.h"
#include "attnkit/backend/capabilities.h"
#include "kernels/cuda/cuda_plan.h"
#include "kernels/cuda/device_plan.h"
#include "kernels/cuda/plan_upload.h"

namespace attnkit::cuda {

// What a planned CUDA backend brings.
struct PlannedKernels {
  std::string_view backend_name;
  // The planner's shape for a layer on a device with num_sms multiprocessors: its kernels'
  // geometry, and whether split counts are rounded (kernels that merge splits in place).
  PlanShape (*plan_shape)(const AttentionLayerParams& layer, int num_sms) = nullptr;
  // Runs one forward: `update` is this step's cache write (nullptr when it writes none);
  // the function writes it (or folds it into the attention launch) and launches.
  void (*launch)(const PagedAttentionParams& params, const DevicePlan& plan,
                 const CacheUpdateParams* update) = nullptr;
};

// What CUDA_FLASH and CUDA_PAGED both declare (platform, dtypes, attention types, masks,
// sinks, soft-cap); each adds its KV-cache dtypes and head sizes.
BackendCapabilities planned_cuda_capabilities();
// The reasons a flat capability list cannot say, shared by both (GQA ratio).
std::vector<std::string> planned_cuda_combination_reasons(const SelectorConfig& config);

// The PlanShape fields every planned backend fills the same way from a layer.
PlanShape layer_plan_shape(const AttentionLayerParams& layer, int num_sms,
                           const KernelGeometry& geometry);

class CudaMetadata final : public AttentionMetadata {
 public:
  const CommonAttentionMetadata& common() const override { return *common_; }

  const CommonAttentionMetadata* common_ = nullptr;
  CudaPlan plan;
  UploadedStep step;  // device pointers into the builder's buffers
  bool causal = true;
};

// What a planned builder reserves for steps within `limits` (PlanUpload's buffers), with
// `shape`'s partial slots bounded by reserved_partial_slots().
UploadCapacity planned_upload_capacity(const PlanShape& shape, const AttentionLayerParams& layer,
                                       const StepLimits& limits);

// CUDA builds only; elsewhere both throw Error(kUnsupported, "... not built into this binary").
std::unique_ptr<MetadataBuilder> make_planned_builder(const PlannedKernels& kernels,
                                                      const AttentionLayerParams& layer);
std::unique_ptr<AttentionImpl> make_planned_impl(const PlannedKernels& kernels,
                                                 const AttentionLayerParams& layer);

}  // namespace attnkit::cuda
