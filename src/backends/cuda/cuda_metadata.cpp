#include "backends/cuda/cuda_metadata.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "attnkit/build_config.h"
#include "attnkit/core/error.h"
#include "kernels/cuda/device_buffer.h"
#include "kernels/cuda/host_staging.h"

namespace attnkit::cuda {

PlanShape plan_shape_for(KernelFamily family, const AttentionLayerParams& layer, int num_sms) {
  PlanShape shape;
  shape.num_heads = layer.num_heads;
  shape.num_kv_heads = layer.num_kv_heads;
  shape.causal = layer.is_causal();
  shape.sliding_window = layer.sliding_window;
  shape.chunk_size = layer.chunk_size;
  shape.num_sms = num_sms;
#if ATTNKIT_HAS_CUDA
  const KernelGeometry geometry = family == KernelFamily::kFlash ? flash_geometry(layer.head_size)
                                                                 : paged_geometry(layer.head_size);
#else
  // Same numbers as the kernels' configurations (flash_launch.cuh, paged_attention.cu),
  // so that plans made without CUDA (planning tests) match the GPU build.
  const KernelGeometry geometry =
      family == KernelFamily::kFlash
          ? KernelGeometry{16, layer.head_size == 256 ? 64 : 128, 64, layer.head_size == 64 ? 4 : 2}
          : KernelGeometry{4, 4, 32, 4};
#endif
  shape.small_rows = geometry.small_rows;
  shape.large_rows = geometry.large_rows;
  shape.kv_tile = geometry.kv_tile;
  // Split-KV until the small-row CTAs fill one wave (as many as fit on every SM at once):
  // more splits only add partial results to merge and per-CTA start-up, fewer leave
  // SMs idle.
  shape.target_ctas = geometry.small_ctas_per_sm * num_sms;
  shape.round_splits = family == KernelFamily::kFlash;
  return shape;
}

#if ATTNKIT_HAS_CUDA
namespace {

class CudaMetadataBuilder final : public MetadataBuilder {
 public:
  CudaMetadataBuilder(KernelFamily family, const AttentionLayerParams& layer)
      : layer_(layer), shape_(plan_shape_for(family, layer, current_device_sm_count())) {}

  const AttentionMetadata& build(const CommonAttentionMetadata& common) override {
    const int num_reqs = common.num_reqs;
    if (static_cast<int>(common.seq_lens.size()) != num_reqs) {
      throw Error(ErrorCode::kInvalidArgument,
                  "seq_lens has " + std::to_string(common.seq_lens.size()) +
                      " entries, expected num_reqs = " + std::to_string(num_reqs));
    }
    if (common.block_table.size() <
        static_cast<size_t>(num_reqs) * static_cast<size_t>(common.max_blocks_per_req)) {
      throw Error(ErrorCode::kInvalidArgument,
                  "block_table has " + std::to_string(common.block_table.size()) +
                      " entries, expected num_reqs * max_blocks_per_req = " +
                      std::to_string(num_reqs * common.max_blocks_per_req));
    }
    meta_.common_ = &common;
    meta_.causal = shape_.causal;
    meta_.plan = plan_work(shape_, common.query_start_loc, common.seq_lens);
    const CudaPlan& plan = meta_.plan;

    // Pack every section into one host staging vector, then one copy.
    staging_.clear();
    const size_t o_qsl = staging_.append(common.query_start_loc);
    const size_t o_sl = staging_.append(common.seq_lens);
    const size_t o_bt = staging_.append(common.block_table);
    const size_t o_sm = staging_.append(common.slot_mapping);
    const size_t o_small = staging_.append(plan.small_items);
    const size_t o_large = staging_.append(plan.large_items);
    const size_t o_comb = staging_.append(plan.combine_items);
    // Split counters start at zero; the kernels leave them at zero after every forward.
    const std::vector<uint32_t> zeros(
        static_cast<size_t>(plan.num_split_groups) * static_cast<size_t>(layer_.num_kv_heads), 0);
    const size_t o_cnt = staging_.append(zeros);
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
    const size_t o_bytes = partial_rows * static_cast<size_t>(layer_.head_size_v) * sizeof(float);
    workspace_.reserve(o_bytes + partial_rows * sizeof(float) + 16);

    DevicePlan& dev = meta_.device;
    dev.small_items = reinterpret_cast<const CudaWorkItem*>(base + o_small);
    dev.num_small = static_cast<int>(plan.small_items.size());
    dev.large_items = reinterpret_cast<const CudaWorkItem*>(base + o_large);
    dev.num_large = static_cast<int>(plan.large_items.size());
    dev.combine_items = reinterpret_cast<const CudaCombineItem*>(base + o_comb);
    dev.num_combine = static_cast<int>(plan.combine_items.size());
    dev.split_counters = reinterpret_cast<unsigned*>(base + o_cnt);
    dev.partial_o = static_cast<float*>(workspace_.data());
    dev.partial_lse = reinterpret_cast<float*>(static_cast<char*>(workspace_.data()) + o_bytes);
    return meta_;
  }

 private:
  AttentionLayerParams layer_;
  PlanShape shape_;
  CudaMetadata meta_;
  HostStaging staging_;
  DeviceBuffer metadata_;
  DeviceBuffer workspace_;
};

}  // namespace

std::unique_ptr<MetadataBuilder> make_cuda_metadata_builder(KernelFamily family,
                                                            const AttentionLayerParams& layer) {
  return std::make_unique<CudaMetadataBuilder>(family, layer);
}
#else
std::unique_ptr<MetadataBuilder> make_cuda_metadata_builder(KernelFamily family,
                                                            const AttentionLayerParams&) {
  throw Error(ErrorCode::kUnsupported,
              std::string(family == KernelFamily::kFlash ? "CUDA_FLASH" : "CUDA_PAGED") +
                  " is not built into this binary (built without CUDA)");
}
#endif

}  // namespace attnkit::cuda
