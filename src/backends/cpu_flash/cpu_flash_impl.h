#pragma once
// CPU_FLASH's per-layer implementation: forward() runs the shared checks
// (backend/forward_check.h), writes the step's fresh K/V into the paged cache (cache_update) and
// runs the flash kernels over the plan its builder made.

#include "attnkit/backend/backend.h"
#include "attnkit/kernels/mla_geometry.h"

namespace attnkit::cpu {

// CPU_FLASH's head sizes (K and V): multiples of kHeadSizeMultiple (flash_attention.h) up
// to MLA's latent width, the widest size the tests prove. Its capabilities and its kernel
// checks both read this.
inline constexpr int kMaxHeadSize = kMlaLatentDim;

class CpuFlashImpl final : public AttentionImpl {
 public:
  // Throws Error(kUnsupported) for a layer CPU_FLASH cannot run.
  explicit CpuFlashImpl(const AttentionLayerParams& layer);
  std::string_view backend_name() const override { return "CPU_FLASH"; }
  void forward(const TensorView& query, const TensorView& key, const TensorView& value,
               const KvCacheTensors& cache, const AttentionMetadata& metadata,
               const TensorView& output, const ExecutionContext& ctx) override;

 private:
  AttentionLayerParams layer_;
};

}  // namespace attnkit::cpu
