#include "backends/cuda_mla/cuda_mla_metadata.h"

#include <cstring>
#include <vector>

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

  const AttentionMetadata& build(const CommonAttentionMetadata& common) override {
    meta_.common_ = &common;
    meta_.plan = plan_mla_step(layer_, common, num_sms_);
    meta_.causal = layer_.is_causal() && common.causal;
    const cuda::CudaPlan& plan = meta_.plan;

    // No split counters: CUDA_MLA merges splits with the combine launch.
    const size_t partial_o_floats = static_cast<size_t>(plan.num_partial_slots) *
                                    static_cast<size_t>(layer_.num_heads) * kMlaValueDim;
    const cuda::UploadedStep step = upload_.upload(
        {common.query_start_loc, common.seq_lens, common.block_table, common.slot_mapping}, plan,
        layer_.num_heads, 0, partial_o_floats);
    meta_.query_start_loc = step.query_start_loc;
    meta_.seq_lens = step.seq_lens;
    meta_.block_table = step.block_table;
    meta_.slot_mapping = step.slot_mapping;
    meta_.device = step.device;
    return meta_;
  }

 private:
  AttentionLayerParams layer_;
  int num_sms_;
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
