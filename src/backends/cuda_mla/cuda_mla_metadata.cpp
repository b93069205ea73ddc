#include "backends/cuda_mla/cuda_mla_metadata.h"

#include <cstring>
#include <vector>

#include "attnkit/backend/step_limits.h"
#include "attnkit/build_config.h"
#include "attnkit/core/error.h"
#include "backends/cuda_mla/cuda_mla_plan.h"
#include "backends/cuda_mla/mla_geometry.h"
#include "kernels/cuda/plan_upload.h"

namespace attnkit::cuda_mla {

#if ATTNKIT_HAS_CUDA
namespace {

class CudaMlaBuilder final : public MetadataBuilder {
 public:
  explicit CudaMlaBuilder(const AttentionLayerParams& layer)
      : layer_(layer), num_sms_(cuda::current_device_sm_count()) {}

  size_t workspace_bytes(const StepLimits& limits) const override {
    check_step_limits(limits, "CUDA_MLA");
    return capacity(limits).total_bytes();
  }

  void reserve(const StepLimits& limits, void* workspace) override {
    check_step_limits(limits, "CUDA_MLA");
    upload_.reserve(capacity(limits), workspace);
    bounds_.max_partial_slots =
        cuda::reserved_partial_slots(mla_plan_shape(layer_, num_sms_), limits);
    limits_ = limits;
  }

  const AttentionMetadata& build(const CommonAttentionMetadata& common,
                                 const ExecutionContext& ctx) override {
    if (limits_.max_num_reqs > 0) check_within_limits(common, limits_, "CUDA_MLA");
    MlaPlanBounds bounds = bounds_;
    if (ctx.graph_shape) {
      require_reserved_for_graphs(limits_, "CUDA_MLA");
      // The split count of this batch shape at the reserved longest context, for every
      // request whatever its length.
      CommonAttentionMetadata longest = common;
      longest.seq_lens = cuda::uniform_seq_lens(common.query_start_loc, limits_.max_seq_len);
      bounds.fixed_splits =
          cuda::max_split_count(plan_mla_step(layer_, longest, num_sms_, bounds_));
    }
    meta_.common_ = &common;
    meta_.plan = plan_mla_step(layer_, common, num_sms_, bounds);
    meta_.causal = layer_.is_causal() && common.causal;
    const cuda::CudaPlan& plan = meta_.plan;

    // No split counters: CUDA_MLA merges splits with the combine launch.
    const size_t partial_o_floats = static_cast<size_t>(plan.num_partial_slots) *
                                    static_cast<size_t>(layer_.num_heads) * kMlaValueDim;
    meta_.step = upload_.upload(
        {common.query_start_loc, common.seq_lens, common.block_table, common.slot_mapping}, plan,
        layer_.num_heads, 0, partial_o_floats, ctx.stream);
    return meta_;
  }

 private:
  cuda::UploadCapacity capacity(const StepLimits& limits) const {
    cuda::PlanShape shape = mla_plan_shape(layer_, num_sms_);
    shape.max_partial_slots = cuda::reserved_partial_slots(shape, limits);
    return cuda::upload_capacity(cuda::plan_bounds(shape, limits), limits,
                                 static_cast<size_t>(limits.max_num_tokens), layer_.num_heads, 1,
                                 kMlaValueDim);
  }

  AttentionLayerParams layer_;
  int num_sms_;
  StepLimits limits_;  // max_num_reqs 0 until reserve()
  MlaPlanBounds bounds_;
  CudaMlaMetadata meta_;
  cuda::PlanUpload upload_;
};

}  // namespace

std::unique_ptr<MetadataBuilder> make_cuda_mla_builder(const AttentionLayerParams& layer) {
  return std::make_unique<CudaMlaBuilder>(layer);
}
#else
std::unique_ptr<MetadataBuilder> make_cuda_mla_builder(const AttentionLayerParams&) {
  throw Error(ErrorCode::kUnsupported,
              "CUDA_MLA is not built into this binary (built without CUDA)");
}
#endif

}  // namespace attnkit::cuda_mla
