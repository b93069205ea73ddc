#include "backends/cuda/cuda_backends.h"

#include <string>

#include "backends/cuda/cuda_attention_impl.h"
#include "backends/cuda/cuda_capabilities.h"
#include "backends/cuda/cuda_metadata.h"

namespace attnkit {
namespace {

class CudaBackend : public AttentionBackend {
 public:
  explicit CudaBackend(cuda::KernelFamily family) : family_(family) {}

  std::string_view name() const override {
    return family_ == cuda::KernelFamily::kFlash ? "CUDA_FLASH" : "CUDA_PAGED";
  }
  std::string_view description() const override {
    return family_ == cuda::KernelFamily::kFlash
               ? "tensor-core (mma.sync) flash attention over the paged KV cache: prefill, "
                 "split-KV decode with GQA heads packed into M, mixed batches"
               : "paged attention on CUDA cores: any head size multiple of 16 up to 256, fp8 "
                 "KV, split-KV decode";
  }
  const BackendCapabilities& capabilities() const override {
    return family_ == cuda::KernelFamily::kFlash ? cuda::flash_capabilities()
                                                 : cuda::paged_capabilities();
  }
  std::unique_ptr<MetadataBuilder> make_builder(const KvCacheSpec& /*spec*/,
                                                const AttentionLayerParams& layer) const override {
    return cuda::make_cuda_metadata_builder(family_, layer);
  }
  std::unique_ptr<AttentionImpl> make_impl(const AttentionLayerParams& layer) const override {
    return cuda::make_cuda_attention_impl(family_, layer);
  }

 protected:
  std::vector<std::string> check_combination(const SelectorConfig& config,
                                             const Platform& /*platform*/) const override {
    std::vector<std::string> reasons;
    if (family_ == cuda::KernelFamily::kFlash) {
      std::string reason = cuda::flash_kv_dtype_reason(config.dtype, config.kv_cache_dtype);
      if (!reason.empty()) reasons.push_back(std::move(reason));
    }
    if (config.num_heads > 0 && config.num_kv_heads > 0 &&
        config.num_heads % config.num_kv_heads != 0) {
      reasons.push_back("num_heads " + std::to_string(config.num_heads) +
                        " is not a multiple of num_kv_heads " +
                        std::to_string(config.num_kv_heads));
    }
    return reasons;
  }

 private:
  cuda::KernelFamily family_;
};

}  // namespace

std::unique_ptr<AttentionBackend> make_cuda_paged_backend() {
  return std::make_unique<CudaBackend>(cuda::KernelFamily::kPaged);
}

std::unique_ptr<AttentionBackend> make_cuda_flash_backend() {
  return std::make_unique<CudaBackend>(cuda::KernelFamily::kFlash);
}

}  // namespace attnkit
