#include "backends/cuda_paged/cuda_paged_backend.h"

#include <string>

#include "attnkit/build_config.h"
#include "attnkit/core/enums.h"
#include "backend/planned_cuda.h"
#include "backends/cuda_paged/paged_kernels.h"

namespace attnkit {
namespace {

const BackendCapabilities& paged_capabilities() {
  static const BackendCapabilities caps = [] {
    BackendCapabilities c = cuda::planned_cuda_capabilities();
    c.kv_cache_dtypes = {KvCacheDType::kFloat16, KvCacheDType::kBFloat16, KvCacheDType::kFp8E4M3,
                         KvCacheDType::kFp8E5M2};
    // 16-byte vector loads of 8 elements need head_size % 8 == 0; lanes own 8-element
    // chunks, at most 32 of them (256).
    c.head_sizes = SizeRule::multiple(16, 16, 256);
    return c;
  }();
  return caps;
}

cuda::PlanShape paged_plan_shape(const AttentionLayerParams& layer, int num_sms) {
  const int kv_bytes = is_fp8(layer.kv_cache_dtype) ? 1 : 2;
  const int group = layer.num_kv_heads > 0 ? layer.num_heads / layer.num_kv_heads : 1;
#if ATTNKIT_HAS_CUDA
  const cuda::KernelGeometry geometry = cuda::paged_geometry(layer.head_size, kv_bytes, group);
#else
  // The kernel's rows and split granularity (paged_attention.cu), and the CTAs per SM that
  // its occupancy query gives on an H100/H200 (the kernel is built for four), so that plans
  // made without CUDA (planning tests) match the GPU build there.
  const int rows = cuda::paged_rows_per_cta(layer.head_size, kv_bytes, group);
  const cuda::KernelGeometry geometry{rows, rows, 128, 4};
#endif
  return cuda::layer_plan_shape(layer, num_sms, geometry);
}

#if ATTNKIT_HAS_CUDA
void paged_launch(const PagedAttentionParams& p, const cuda::DevicePlan& plan,
                  const CacheUpdateParams* update) {
  if (update != nullptr) cuda::launch_cache_update(*update, plan.stream);
  cuda::launch_paged_attention(p, plan);
}
#else
void paged_launch(const PagedAttentionParams&, const cuda::DevicePlan&, const CacheUpdateParams*) {}
#endif

const cuda::PlannedKernels kPagedKernels{"CUDA_PAGED", paged_plan_shape, paged_launch};

class CudaPagedBackend final : public AttentionBackend {
 public:
  std::string_view name() const override { return kPagedKernels.backend_name; }
  std::string_view description() const override {
    return "paged attention on CUDA cores: any head size multiple of 16 up to 256, fp8 KV, "
           "split-KV decode";
  }
  const BackendCapabilities& capabilities() const override { return paged_capabilities(); }
  std::unique_ptr<MetadataBuilder> make_builder(const KvCacheSpec& /*spec*/,
                                                const AttentionLayerParams& layer) const override {
    return cuda::make_planned_builder(kPagedKernels, layer);
  }
  std::unique_ptr<AttentionImpl> make_impl(const AttentionLayerParams& layer) const override {
    return cuda::make_planned_impl(kPagedKernels, layer);
  }

 protected:
  std::vector<std::string> check_combination(const SelectorConfig& config,
                                             const Platform& /*platform*/) const override {
    return cuda::planned_cuda_combination_reasons(config);
  }
};

}  // namespace

std::unique_ptr<AttentionBackend> make_cuda_paged_backend() {
  return std::make_unique<CudaPagedBackend>();
}

}  // namespace attnkit
