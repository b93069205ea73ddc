#include "backend/planned_cuda.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "attnkit/backend/forward_check.h"
#include "attnkit/backend/paged_params.h"
#include "attnkit/backend/step_limits.h"
#include "attnkit/build_config.h"
#include "attnkit/core/device_memory.h"
#include "attnkit/core/error.h"
#include "kernels/cuda/plan_upload.h"

namespace attnkit::cuda {

BackendCapabilities planned_cuda_capabilities() {
  BackendCapabilities caps;
  caps.platform = PlatformKind::kCuda;
  caps.min_compute_capability = 80;  // cp.async, bf16 mma and ldmatrix need sm_80
  caps.dtypes = {DType::kFloat16, DType::kBFloat16};
  caps.kernel_block_sizes = SizeRule::any();
  caps.preferred_block_size = 16;
  caps.attention_types = {AttentionType::kDecoder, AttentionType::kEncoder,
                          AttentionType::kEncoderOnly, AttentionType::kEncoderDecoder};
  caps.sliding_window = true;
  caps.chunked_local = true;
  caps.sinks = true;
  caps.soft_cap = true;
  caps.non_causal = true;
  // Split-KV partitioning depends on the whole batch, so results are not batch invariant.
  caps.batch_invariant = false;
  // A graph-shaped build's partition depends only on the request count and each request's
  // query tokens (fixed split counts; kernels skip empty splits), and every launch reads
  // the batch from the reserved buffers: one captured graph serves every batch whose
  // requests all bring the captured number of query tokens.
  caps.cuda_graphs = CudaGraphSupport::kUniformBatch;
  return caps;
}

std::vector<std::string> planned_cuda_combination_reasons(const SelectorConfig& config) {
  std::vector<std::string> reasons;
  if (config.num_heads > 0 && config.num_kv_heads > 0 &&
      config.num_heads % config.num_kv_heads != 0) {
    reasons.push_back("num_heads " + std::to_string(config.num_heads) +
                      " is not a multiple of num_kv_heads " + std::to_string(config.num_kv_heads));
  }
  return reasons;
}

PlanShape layer_plan_shape(const AttentionLayerParams& layer, int num_sms,
                           const KernelGeometry& geometry) {
  PlanShape shape;
  shape.num_heads = layer.num_heads;
  shape.num_kv_heads = layer.num_kv_heads;
  shape.causal = layer.is_causal();
  shape.sliding_window = layer.sliding_window;
  shape.chunk_size = layer.chunk_size;
  shape.num_sms = num_sms;
  shape.small_rows = geometry.small_rows;
  shape.large_rows = geometry.large_rows;
  shape.kv_tile = geometry.kv_tile;
  // Split-KV until the small-row CTAs fill one wave (as many as fit on every SM at once):
  // more splits only add partial results to merge and per-CTA start-up, fewer leave
  // SMs idle.
  shape.target_ctas = geometry.small_ctas_per_sm * num_sms;
  return shape;
}

UploadCapacity planned_upload_capacity(const PlanShape& shape, const AttentionLayerParams& layer,
                                       const StepLimits& limits) {
  PlanShape bounded = shape;
  bounded.max_partial_slots = reserved_partial_slots(shape, limits);
  // Cross attention writes every request's encoder rows in the step that brings them.
  const size_t slot_rows = layer.attn_type == AttentionType::kEncoderDecoder
                               ? std::max(static_cast<size_t>(limits.max_num_tokens),
                                          static_cast<size_t>(limits.max_num_reqs) *
                                              static_cast<size_t>(limits.max_seq_len))
                               : static_cast<size_t>(limits.max_num_tokens);
  return upload_capacity(plan_bounds(bounded, limits), limits, slot_rows, layer.num_heads,
                         layer.num_kv_heads, layer.head_size_v);
}

#if ATTNKIT_HAS_CUDA
namespace {

class PlannedBuilder final : public MetadataBuilder {
 public:
  PlannedBuilder(const PlannedKernels& kernels, const AttentionLayerParams& layer)
      : kernels_(kernels),
        layer_(layer),
        shape_(kernels.plan_shape(layer, current_device_sm_count())) {}

  size_t workspace_bytes(const StepLimits& limits) const override {
    check_step_limits(limits, kernels_.backend_name);
    return planned_upload_capacity(shape_, layer_, limits).total_bytes();
  }

  void reserve(const StepLimits& limits, void* workspace) override {
    check_step_limits(limits, kernels_.backend_name);
    upload_.reserve(planned_upload_capacity(shape_, layer_, limits), workspace);
    shape_.max_partial_slots = reserved_partial_slots(shape_, limits);
    limits_ = limits;
  }

  const AttentionMetadata& build(const CommonAttentionMetadata& common,
                                 const ExecutionContext& ctx) override {
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
    if (limits_.max_num_reqs > 0) check_within_limits(common, limits_, kernels_.backend_name);
    PlanShape shape = shape_;
    if (ctx.graph_shape) {
      require_reserved_for_graphs(limits_, kernels_.backend_name);
      // The split count a batch of this shape gets at the reserved longest context, for
      // every request whatever its length: the plan's size depends on the shape alone.
      shape.fixed_splits =
          max_split_count(plan_work(shape_, common.query_start_loc,
                                    uniform_seq_lens(common.query_start_loc, limits_.max_seq_len)));
    }
    meta_.common_ = &common;
    meta_.causal = shape.causal;
    meta_.plan = plan_work(shape, common.query_start_loc, common.seq_lens);
    const CudaPlan& plan = meta_.plan;
    const size_t num_counters =
        static_cast<size_t>(plan.num_split_groups) * static_cast<size_t>(layer_.num_kv_heads);
    const size_t partial_o_floats = static_cast<size_t>(plan.num_partial_slots) *
                                    static_cast<size_t>(layer_.num_heads) *
                                    static_cast<size_t>(layer_.head_size_v);
    meta_.step = upload_.upload(
        {common.query_start_loc, common.seq_lens, common.block_table, common.slot_mapping}, plan,
        layer_.num_heads, num_counters, partial_o_floats, ctx.stream);
    return meta_;
  }

 private:
  PlannedKernels kernels_;
  AttentionLayerParams layer_;
  PlanShape shape_;
  StepLimits limits_;  // max_num_reqs 0 until reserve()
  CudaMetadata meta_;
  PlanUpload upload_;
};

class PlannedImpl final : public AttentionImpl {
 public:
  PlannedImpl(const PlannedKernels& kernels, const AttentionLayerParams& layer)
      : kernels_(kernels), layer_(layer), memory_(make_current_cuda_memory()) {
    if (!layer.sinks.empty()) {
      if (static_cast<int>(layer.sinks.size()) != layer.num_heads) {
        throw Error(ErrorCode::kInvalidArgument,
                    std::string(kernels.backend_name) + ": " + std::to_string(layer.sinks.size()) +
                        " sink logits for " + std::to_string(layer.num_heads) + " heads");
      }
      const size_t bytes = layer.sinks.size() * sizeof(float);
      sinks_ = DeviceBuffer(*memory_, bytes);
      memory_->copy_to_device(sinks_.data(), layer.sinks.data(), bytes);
    }
    // Every kernel this layer's forwards may launch, loaded now (DevicePlan::load_only).
    DevicePlan load;
    load.load_only = true;
    CacheUpdateParams update = layer_cache_update_params_for(layer);
    kernels_.launch(layer_params_for(layer), load, uses_paged_cache(layer) ? &update : nullptr);
  }

  std::string_view backend_name() const override { return kernels_.backend_name; }

  void forward(const TensorView& query, const TensorView& key, const TensorView& value,
               const KvCacheTensors& cache, const AttentionMetadata& metadata,
               const TensorView& output, const ExecutionContext& ctx) override;

 private:
  PlannedKernels kernels_;
  AttentionLayerParams layer_;
  std::unique_ptr<DeviceMemory> memory_;
  DeviceBuffer sinks_;
};

void PlannedImpl::forward(const TensorView& query, const TensorView& key, const TensorView& value,
                          const KvCacheTensors& cache, const AttentionMetadata& metadata,
                          const TensorView& output, const ExecutionContext& ctx) {
  const std::string_view name = kernels_.backend_name;
  const auto* meta = dynamic_cast<const CudaMetadata*>(&metadata);
  if (meta == nullptr) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string(name) + ": metadata was not built by a CUDA backend's builder");
  }
  // The kernels read 8 elements (16 bytes for 16-bit types) at a time along the head
  // dimension, so every row must start on such a boundary; they read the block ids of a
  // whole KV tile before masking, so every block-table entry must exist.
  const ForwardCheckOptions checks{.backend = name,
                                   .device = DeviceType::kCuda,
                                   .vector_elements = 8,
                                   .whole_block_table = true};
  const ForwardArgs args{layer_, query, key, value, cache, meta->common(), output};
  check_forward(args, checks);

  // The shared mapping, with the device copies of the metadata and sinks.
  const UploadedStep& step = meta->step;
  PagedAttentionParams p = paged_params_for(args);
  p.query_start_loc = step.query_start_loc;
  p.seq_lens = step.seq_lens;
  p.causal = meta->causal;
  p.sinks = layer_.sinks.empty() ? nullptr : static_cast<const float*>(sinks_.data());
  CacheUpdateParams update;
  bool writes = false;
  if (uses_paged_cache(layer_)) {
    p.block_table = step.block_table;
    if (writes_cache(args)) {
      update = cache_update_params_for(args);
      update.slot_mapping = step.slot_mapping;
      writes = true;
    }
  } else {
    p.kv_start_loc = step.query_start_loc;
  }
  DevicePlan device = step.device;
  device.stream = ctx.stream;
  kernels_.launch(p, device, writes ? &update : nullptr);
}

}  // namespace

std::unique_ptr<MetadataBuilder> make_planned_builder(const PlannedKernels& kernels,
                                                      const AttentionLayerParams& layer) {
  return std::make_unique<PlannedBuilder>(kernels, layer);
}

std::unique_ptr<AttentionImpl> make_planned_impl(const PlannedKernels& kernels,
                                                 const AttentionLayerParams& layer) {
  return std::make_unique<PlannedImpl>(kernels, layer);
}
#else
std::unique_ptr<MetadataBuilder> make_planned_builder(const PlannedKernels& kernels,
                                                      const AttentionLayerParams&) {
  throw Error(ErrorCode::kUnsupported, std::string(kernels.backend_name) +
                                           " is not built into this binary (built without CUDA)");
}

std::unique_ptr<AttentionImpl> make_planned_impl(const PlannedKernels& kernels,
                                                 const AttentionLayerParams&) {
  throw Error(ErrorCode::kUnsupported, std::string(kernels.backend_name) +
                                           " is not built into this binary (built without CUDA)");
}
#endif

}  // namespace attnkit::cuda
