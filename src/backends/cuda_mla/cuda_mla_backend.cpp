#include "backends/cuda_mla/cuda_mla_backend.h"

#include <string>

#include "backends/cuda_mla/cuda_mla_impl.h"
#include "backends/cuda_mla/cuda_mla_metadata.h"
#include "backends/cuda_mla/mla_geometry.h"

namespace attnkit {
namespace {

class CudaMlaBackend final : public AttentionBackend {
 public:
  std::string_view name() const override { return "CUDA_MLA"; }
  std::string_view description() const override {
    return "MLA (latent KV) attention with tensor cores (mma.sync): query heads packed into M, "
           "one latent-row read for all heads, split-KV decode, prefill and mixed batches, "
           "fp8 e4m3 latent cache";
  }
  const BackendCapabilities& capabilities() const override { return cuda_mla_capabilities(); }
  std::unique_ptr<MetadataBuilder> make_builder(const KvCacheSpec& /*spec*/,
                                                const AttentionLayerParams& layer) const override {
    return cuda_mla::make_cuda_mla_builder(layer);
  }
  std::unique_ptr<AttentionImpl> make_impl(const AttentionLayerParams& layer) const override {
    return cuda_mla::make_cuda_mla_impl(layer);
  }

 protected:
  // The capability list checks head_size and dtypes; MLA also fixes the latent split and
  // one KV head, and the tensor cores need a 16-bit cache in the compute dtype.
  std::vector<std::string> check_combination(const SelectorConfig& c,
                                             const Platform& /*platform*/) const override {
    std::vector<std::string> reasons;
    if (c.head_size_v != kMlaValueDim) {
      reasons.push_back("head_size_v (kv_lora_rank) " + std::to_string(c.head_size_v) +
                        " not supported (supported: 512)");
    }
    if (c.mla_rope_dim != 0 && c.mla_rope_dim != kMlaRopeDim) {
      reasons.push_back("MLA rope dim " + std::to_string(c.mla_rope_dim) +
                        " not supported (supported: 64)");
    }
    if (c.num_kv_heads > 1) {
      reasons.push_back("num_kv_heads " + std::to_string(c.num_kv_heads) +
                        " not supported (MLA has one latent KV head)");
    }
    const ScalarType kv = scalar_type_of(c.kv_cache_dtype, c.dtype);
    if (kv != ScalarType::kFp8E4M3 && kv != scalar_type_of(c.dtype)) {
      reasons.push_back("kv_cache_dtype " + std::string(to_string(c.kv_cache_dtype)) +
                        " differs from dtype " + std::string(to_string(c.dtype)) +
                        " (CUDA_MLA feeds a 16-bit latent cache to the tensor cores as is: "
                        "supported: auto, the compute dtype, fp8_e4m3)");
    }
    return reasons;
  }
};

}  // namespace

const BackendCapabilities& cuda_mla_capabilities() {
  static const BackendCapabilities caps = [] {
    BackendCapabilities c;
    c.platform = PlatformKind::kCuda;
    c.min_compute_capability = 80;  // cp.async, bf16 mma.sync and ldmatrix need sm_80
    c.dtypes = {DType::kFloat16, DType::kBFloat16};
    c.kv_cache_dtypes = {KvCacheDType::kFloat16, KvCacheDType::kBFloat16, KvCacheDType::kFp8E4M3};
    // kv_lora_rank 512 + rope 64 (DeepSeek-V2/V3); V is the 512-wide latent prefix.
    c.head_sizes = SizeRule::list({kMlaLatentDim});
    c.separate_v_head_size = true;
    // Latent rows are addressed per key (one block-table lookup per key), so any page size
    // works; 64 is DeepSeek's (and FlashMLA's) page.
    c.kernel_block_sizes = SizeRule::any();
    c.preferred_block_size = 64;
    c.attention_types = {AttentionType::kDecoder};
    c.mla = true;
    c.mla_only = true;
    c.sliding_window = true;
    // Split-KV partitioning depends on the whole batch: not batch invariant.
    c.batch_invariant = false;
    c.cuda_graphs = CudaGraphSupport::kUniformBatch;  // as CUDA_FLASH: graph-shaped plans
    return c;
  }();
  return caps;
}

std::unique_ptr<AttentionBackend> make_cuda_mla_backend() {
  return std::make_unique<CudaMlaBackend>();
}

}  // namespace attnkit
