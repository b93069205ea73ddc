#include "backends/cuda_mla/cuda_mla_plan.h"

#include <algorithm>
#include <string>

#include "attnkit/backend/forward_check.h"
#include "attnkit/core/error.h"
#include "backends/cuda_mla/mla_geometry.h"

namespace attnkit::cuda_mla {

cuda::PlanShape mla_plan_shape(const AttentionLayerParams& layer, int num_sms) {
  cuda::PlanShape shape;
  shape.num_heads = layer.num_heads;
  shape.num_kv_heads = 1;
  shape.causal = layer.is_causal();
  shape.sliding_window = layer.sliding_window;
  shape.num_sms = num_sms;
  shape.small_rows = MlaSmallConfig::kRows;
  shape.large_rows = MlaLargeConfig::kRows;
  shape.kv_tile = kKvTile;
  // A large-row CTA fills an SM's shared memory and two small-row CTAs do: about two CTAs
  // per SM is a full wave. Splitting further only adds partial results (64 KiB per token
  // and split at 32 heads) to write and merge.
  shape.target_ctas = 2 * num_sms;
  return shape;
}

cuda::CudaPlan plan_mla_step(const AttentionLayerParams& layer,
                             const CommonAttentionMetadata& common, int num_sms,
                             const MlaPlanBounds& bounds) {
  check_common_metadata(common, layer, "CUDA_MLA");  // also: lengths fit the block table
  if (common.block_size <= 0) {
    throw Error(ErrorCode::kInvalidArgument,
                "CUDA_MLA: block_size " + std::to_string(common.block_size) +
                    " must be positive (MLA always reads the paged latent cache)");
  }
  cuda::PlanShape shape = mla_plan_shape(layer, num_sms);
  shape.causal = shape.causal && common.causal;
  shape.max_partial_slots = bounds.max_partial_slots;
  if (bounds.fixed_splits > 0) {
    shape.fixed_splits = bounds.fixed_splits;
    return cuda::plan_work(shape, common.query_start_loc, common.seq_lens);
  }
  // The split count sets the grid size, and a grid of 1.2 waves takes as long as one of 2.
  // Plan for a few grid targets (whole numbers of waves) and keep the fullest last wave;
  // among equally full ones, the fewest CTAs (the fewest partial results to merge).
  cuda::CudaPlan best;
  double best_efficiency = -1.0;
  for (int waves : {1, 2, 3, 4, 6, 8}) {
    shape.target_ctas = waves * num_sms;
    cuda::CudaPlan plan = cuda::plan_work(shape, common.query_start_loc, common.seq_lens);
    const double efficiency = wave_efficiency(plan, num_sms);
    const size_t ctas = plan.small_items.size() + plan.large_items.size();
    const size_t best_ctas = best.small_items.size() + best.large_items.size();
    if (efficiency > best_efficiency + 0.02 ||
        (efficiency > best_efficiency - 0.02 && ctas < best_ctas)) {
      best_efficiency = std::max(best_efficiency, efficiency);
      best = std::move(plan);
    }
  }
  return best;
}

double wave_efficiency(const cuda::CudaPlan& plan, int num_sms) {
  const auto slots_used = [](size_t ctas, size_t per_wave) {
    return (ctas + per_wave - 1) / per_wave * per_wave;
  };
  const size_t small = plan.small_items.size(), large = plan.large_items.size();
  const size_t sms = static_cast<size_t>(std::max(num_sms, 1));
  const size_t slots = slots_used(small, sms * MlaSmallConfig::kCtasPerSm90) +
                       slots_used(large, sms * MlaLargeConfig::kCtasPerSm90);
  return slots == 0 ? 1.0 : static_cast<double>(small + large) / static_cast<double>(slots);
}

}  // namespace attnkit::cuda_mla
