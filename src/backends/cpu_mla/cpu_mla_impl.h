#pragma once
// CPU_MLA's per-step plan (AttentionMetadata), its builder and the per-layer
// implementation. build() validates the common metadata and plans the work items once per
// step; forward() runs the shared checks (backend/forward_check.h), writes the step's latent
// vectors into the cache (CPU_FLASH's vectorised cache update) and runs the MLA kernels.

#include <memory>

#include "attnkit/backend/backend.h"
#include "attnkit/kernels/mla_geometry.h"
#include "backends/cpu_mla/mla_attention.h"
#include "backends/cpu_mla/mla_plan.h"

namespace attnkit::cpu_mla {

// The one MLA geometry (attnkit/kernels/mla_geometry.h).
inline constexpr int kKvLoraRank = kMlaKvLoraRank;  // head_size_v: the latent (and V) width
inline constexpr int kRopeDim = kMlaRopeDim;        // decoupled rope part after the latent

class CpuMlaMetadata final : public AttentionMetadata {
 public:
  const CommonAttentionMetadata& common() const override { return *common_; }
  const MlaPlan& plan() const { return plan_; }
  // Layers sharing this plan run one after another, so one workspace serves them all. The
  // builder keeps one metadata and sizes its workspace in build(), which only grows it.
  MlaWorkspace& workspace() const { return workspace_; }

 private:
  friend class CpuMlaBuilder;
  const CommonAttentionMetadata* common_ = nullptr;
  MlaPlan plan_;
  mutable MlaWorkspace workspace_;
};

class CpuMlaBuilder final : public MetadataBuilder {
 public:
  explicit CpuMlaBuilder(const AttentionLayerParams& layer);
  // Throws Error(kInvalidArgument) naming the inconsistent field of `common`.
  const AttentionMetadata& build(const CommonAttentionMetadata& common,
                                 const ExecutionContext& ctx) override;

 private:
  AttentionLayerParams layer_;
  CpuMlaMetadata metadata_;
};

class CpuMlaImpl final : public AttentionImpl {
 public:
  // Throws Error(kUnsupported) for a layer CPU_MLA cannot run.
  explicit CpuMlaImpl(const AttentionLayerParams& layer);
  std::string_view backend_name() const override { return "CPU_MLA"; }
  void forward(const TensorView& query, const TensorView& key, const TensorView& value,
               const KvCacheTensors& cache, const AttentionMetadata& metadata,
               const TensorView& output, const ExecutionContext& ctx) override;

 private:
  AttentionLayerParams layer_;
};

}  // namespace attnkit::cpu_mla
