#include "backends/cuda_flash/cuda_flash_backend.h"

#include <string>

#include "attnkit/build_config.h"
#include "backend/planned_cuda.h"
#include "backends/cuda_flash/flash_kernels.h"

namespace attnkit {
namespace {

// The head sizes CUDA_FLASH has kernels for (one template instance each, dispatched in
// flash_dispatch.cu): the XOR swizzle of shared memory needs at least 8 16-byte chunks per
// row (64) and the output accumulators must fit in registers (256).
const BackendCapabilities& flash_capabilities() {
  static const BackendCapabilities caps = [] {
    BackendCapabilities c = cuda::planned_cuda_capabilities();
    c.kv_cache_dtypes = {KvCacheDType::kFloat16, KvCacheDType::kBFloat16, KvCacheDType::kFp8E4M3,
                         KvCacheDType::kFp8E5M2};
    c.head_sizes = SizeRule::list({cuda::kFlashHeadSizes.begin(), cuda::kFlashHeadSizes.end()});
    return c;
  }();
  return caps;
}

// CUDA_FLASH feeds a 16-bit cache straight to the tensor cores, so it must hold the compute
// dtype; an fp8 cache is converted after each tile load (to the compute dtype, or to fp16 in
// the Hopper prefill kernel, which scales bf16 queries into fp16's range). A reason when
// `kv_cache_dtype` is a 16-bit type other than the compute dtype, else empty.
std::string flash_kv_dtype_reason(DType dtype, KvCacheDType kv_cache_dtype) {
  if (is_fp8(kv_cache_dtype) || scalar_type_of(kv_cache_dtype, dtype) == scalar_type_of(dtype)) {
    return {};
  }
  return "kv_cache_dtype " + std::string(to_string(kv_cache_dtype)) + " differs from dtype " +
         std::string(to_string(dtype)) +
         " (CUDA_FLASH feeds a 16-bit cache to the tensor cores: supported: auto, the compute "
         "dtype, fp8_e4m3, fp8_e5m2)";
}

cuda::PlanShape flash_plan_shape(const AttentionLayerParams& layer, int num_sms) {
#if ATTNKIT_HAS_CUDA
  const cuda::KernelGeometry geometry =
      cuda::flash_geometry(layer.head_size, is_fp8(layer.kv_cache_dtype));
#else
  // Same numbers as the kernels' configurations (flash_launch.cuh), so that plans made
  // without CUDA (planning tests) match the GPU build (where fp8 caches also take these
  // large-row tiles).
  const cuda::KernelGeometry geometry{16, layer.head_size == 256 ? 64 : 128, 64,
                                      layer.head_size == 64 ? 4 : 2};
#endif
  cuda::PlanShape shape = cuda::layer_plan_shape(layer, num_sms, geometry);
  shape.round_splits = true;  // the last CTA of a split group merges it in place
  return shape;
}

#if ATTNKIT_HAS_CUDA
void flash_launch(const PagedAttentionParams& p, const cuda::DevicePlan& plan,
                  const CacheUpdateParams* update) {
  cuda::FlashLaunchOptions options;
  if (update != nullptr) {
    if (cuda::can_fold_cache_update(*update, p, plan, cuda::flash_hopper_prefill())) {
      options.fresh_kv = *update;  // the attention launch writes the cache itself
    } else {
      cuda::launch_cache_update(*update, plan.stream);
    }
  }
  cuda::launch_flash_attention(p, plan, options);
}
#else
void flash_launch(const PagedAttentionParams&, const cuda::DevicePlan&, const CacheUpdateParams*) {}
#endif

const cuda::PlannedKernels kFlashKernels{"CUDA_FLASH", flash_plan_shape, flash_launch};

class CudaFlashBackend final : public AttentionBackend {
 public:
  std::string_view name() const override { return kFlashKernels.backend_name; }
  std::string_view description() const override {
    return "tensor-core (mma.sync) flash attention over the paged KV cache: prefill, "
           "split-KV decode with GQA heads packed into M, mixed batches; fp8 caches converted "
           "after each tile load";
  }
  const BackendCapabilities& capabilities() const override { return flash_capabilities(); }
  std::unique_ptr<MetadataBuilder> make_builder(const KvCacheSpec& /*spec*/,
                                                const AttentionLayerParams& layer) const override {
    return cuda::make_planned_builder(kFlashKernels, layer);
  }
  std::unique_ptr<AttentionImpl> make_impl(const AttentionLayerParams& layer) const override {
    return cuda::make_planned_impl(kFlashKernels, layer);
  }

 protected:
  std::vector<std::string> check_combination(const SelectorConfig& config,
                                             const Platform& /*platform*/) const override {
    std::vector<std::string> reasons = cuda::planned_cuda_combination_reasons(config);
    std::string reason = flash_kv_dtype_reason(config.dtype, config.kv_cache_dtype);
    if (!reason.empty()) reasons.insert(reasons.begin(), std::move(reason));
    return reasons;
  }
};

}  // namespace

std::unique_ptr<AttentionBackend> make_cuda_flash_backend() {
  return std::make_unique<CudaFlashBackend>();
}

}  // namespace attnkit
