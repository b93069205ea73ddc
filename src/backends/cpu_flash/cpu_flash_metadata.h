#pragma once
// CPU_FLASH's per-step plan (AttentionMetadata) and its builder. build() checks the
// common metadata (check_common_metadata), cuts the batch into work items (flash_plan.h) and sizes
// the scratch once per step; every layer's forward() then only runs.

#include <memory>

#include "attnkit/backend/backend.h"
#include "attnkit/backend/metadata.h"
#include "backends/cpu_flash/flash_plan.h"

namespace attnkit::cpu {

class CpuFlashMetadata final : public AttentionMetadata {
 public:
  const CommonAttentionMetadata& common() const override { return *common_; }
  const FlashPlan& plan() const { return plan_; }
  // Scratch the kernels run in. Layers sharing this plan run one after another, so one
  // workspace serves them all.
  FlashWorkspace& workspace() const { return workspace_; }

 private:
  friend class CpuFlashBuilder;
  const CommonAttentionMetadata* common_ = nullptr;
  FlashPlan plan_;
  mutable FlashWorkspace workspace_;
};

class CpuFlashBuilder final : public MetadataBuilder {
 public:
  explicit CpuFlashBuilder(const AttentionLayerParams& layer);
  // Throws Error(kInvalidArgument) naming the inconsistent field of `common` (the shared
  // check_common_metadata()).
  const AttentionMetadata& build(const CommonAttentionMetadata& common,
                                 const ExecutionContext& ctx) override;

 private:
  AttentionLayerParams layer_;
  CpuFlashMetadata metadata_;
};

}  // namespace attnkit::cpu
