#include "backends/cpu_flash/cpu_flash_metadata.h"

#include <omp.h>

#include <span>

#include "attnkit/backend/forward_check.h"
#include "backends/cpu_flash/flash_attention.h"

namespace attnkit::cpu {

CpuFlashBuilder::CpuFlashBuilder(const AttentionLayerParams& layer) : layer_(layer) {}

const AttentionMetadata& CpuFlashBuilder::build(const CommonAttentionMetadata& c,
                                                const ExecutionContext& /*ctx*/) {
  // The rest (lengths against the block table, slots against the cache, fresh K/V rows)
  // needs the tensors and is forward()'s check_forward().
  check_common_metadata(c, layer_, "CPU_FLASH");
  MaskRule mask;
  mask.causal = layer_.is_causal() && c.causal;
  mask.sliding_window = layer_.sliding_window;
  mask.chunk_size = layer_.chunk_size;
  FlashPlanOptions options;
  options.num_threads = omp_get_max_threads();
  if (active_cpu_isa() == CpuIsa::kAvx512 &&
      amx_tiles_take(scalar_type_of(layer_.dtype),
                     scalar_type_of(layer_.kv_cache_dtype, layer_.dtype), layer_.head_size,
                     layer_.head_size_v)) {
    options.rows_per_tile = kAmxRowsPerTile;
  } else if (active_cpu_isa() == CpuIsa::kAvx2) {
    options.rows_per_tile = kOuterRowsPerTile;
  }
  metadata_.common_ = &c;
  metadata_.plan_ = make_flash_plan(
      std::span<const int32_t>(c.query_start_loc), std::span<const int32_t>(c.seq_lens),
      layer_.num_heads, layer_.num_kv_heads, layer_.head_size, layer_.head_size_v, mask, options);
  metadata_.workspace_.ensure(metadata_.plan_);
  return metadata_;
}

}  // namespace attnkit::cpu
