#include "backends/cuda_mla/cuda_mla_metadata.h"

#include <cstring>
#include <vector>

#include "attnkit/build_config.h"
#include "attnkit/core/error.h"
#include "backends/cuda_mla/cuda_mla_plan.h"
#include "backends/cuda_mla/mla_geometry.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/host_staging.h"

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

    // Pack every section into one host staging vector, then one copy.
    staging_.clear();
    const size_t o_qsl = staging_.append(common.query_start_loc);
    const size_t o_sl = staging_.append(common.seq_lens);
    const size_t o_bt = staging_.append(common.block_table);
    const size_t o_sm = staging_.append(common.slot_mapping);
    const size_t o_small = staging_.append(plan.small_items);
    const size_t o_large = staging_.append(plan.large_items);
    const size_t o_comb = staging_.append(plan.combine_items);
    metadata_.reserve(staging_.size());
    metadata_.upload(staging_.data(), staging_.size());
    char* base = static_cast<char*>(metadata_.data());
    meta_.query_start_loc = reinterpret_cast<const int32_t*>(base + o_qsl);
    meta_.seq_lens = reinterpret_cast<const int32_t*>(base + o_sl);
    meta_.block_table =
        common.block_table.empty() ? nullptr : reinterpret_cast<const int32_t*>(base + o_bt);
    meta_.slot_mapping =
        common.slot_mapping.empty() ? nullptr : reinterpret_cast<const int64_t*>(base + o_sm);

    const size_t partial_rows =
        static_cast<size_t>(plan.num_partial_slots) * static_cast<size_t>(layer_.num_heads);
    const size_t o_bytes = partial_rows * kMlaValueDim * sizeof(float);
    workspace_.reserve(mla_workspace_bytes(plan, layer_.num_heads) + 16);

    cuda::DevicePlan& dev = meta_.device;
    dev.small_items = reinterpret_cast<const cuda::CudaWorkItem*>(base + o_small);
    dev.num_small = static_cast<int>(plan.small_items.size());
    dev.large_items = reinterpret_cast<const cuda::CudaWorkItem*>(base + o_large);
    dev.num_large = static_cast<int>(plan.large_items.size());
    dev.combine_items = reinterpret_cast<const cuda::CudaCombineItem*>(base + o_comb);
    dev.num_combine = static_cast<int>(plan.combine_items.size());
    dev.partial_o = static_cast<float*>(workspace_.data());
    dev.partial_lse = reinterpret_cast<float*>(static_cast<char*>(workspace_.data()) + o_bytes);
    return meta_;
  }

 private:
  AttentionLayerParams layer_;
  int num_sms_;
  CudaMlaMetadata meta_;
  cuda::HostStaging staging_;
  cuda::DeviceBuffer metadata_;
  cuda::DeviceBuffer workspace_;
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
