#include "backends/cpu_mla/cpu_mla_backend.h"

#include <string>

#include "backends/cpu_mla/cpu_mla_impl.h"

namespace attnkit {
namespace {

class CpuMlaBackend final : public AttentionBackend {
 public:
  std::string_view name() const override { return "CPU_MLA"; }
  std::string_view description() const override {
    return "MLA (latent KV) attention on the CPU: all heads of a request per latent-row read, "
           "AVX-512/AVX2/portable kernels chosen at run time, OpenMP, split-KV decode";
  }
  const BackendCapabilities& capabilities() const override { return cpu_mla_capabilities(); }
  std::unique_ptr<MetadataBuilder> make_builder(const KvCacheSpec& /*spec*/,
                                                const AttentionLayerParams& layer) const override {
    return std::make_unique<cpu_mla::CpuMlaBuilder>(layer);
  }
  std::unique_ptr<AttentionImpl> make_impl(const AttentionLayerParams& layer) const override {
    return std::make_unique<cpu_mla::CpuMlaImpl>(layer);
  }

 protected:
  // The capability list checks head_size; MLA also fixes the latent split and one KV head.
  std::vector<std::string> check_combination(const SelectorConfig& c,
                                             const Platform& /*platform*/) const override {
    std::vector<std::string> reasons;
    if (c.head_size_v != cpu_mla::kKvLoraRank) {
      reasons.push_back("head_size_v (kv_lora_rank) " + std::to_string(c.head_size_v) +
                        " not supported (supported: 512)");
    }
    if (c.mla_rope_dim != 0 && c.mla_rope_dim != cpu_mla::kRopeDim) {
      reasons.push_back("MLA rope dim " + std::to_string(c.mla_rope_dim) +
                        " not supported (supported: 64)");
    }
    if (c.num_kv_heads > 1) {
      reasons.push_back("num_kv_heads " + std::to_string(c.num_kv_heads) +
                        " not supported (MLA has one latent KV head)");
    }
    return reasons;
  }
};

}  // namespace

const BackendCapabilities& cpu_mla_capabilities() {
  static const BackendCapabilities caps = [] {
    BackendCapabilities c;
    c.platform = PlatformKind::kCpu;
    c.dtypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
    c.kv_cache_dtypes = {KvCacheDType::kFloat32, KvCacheDType::kFloat16, KvCacheDType::kBFloat16,
                         KvCacheDType::kFp8E4M3, KvCacheDType::kFp8E5M2};
    // kv_lora_rank 512 + rope 64 (DeepSeek-V2/V3); V is the 512-wide latent prefix.
    c.head_sizes = SizeRule::list({cpu_mla::kKvLoraRank + cpu_mla::kRopeDim});
    c.separate_v_head_size = true;
    c.kernel_block_sizes = SizeRule::any();  // latent rows are addressed per key
    c.preferred_block_size = 16;
    c.attention_types = {AttentionType::kDecoder};
    c.mla = true;
    c.mla_only = true;
    c.sliding_window = true;
    // Split-KV decode changes the summation order with the batch: not batch invariant.
    c.batch_invariant = false;
    return c;
  }();
  return caps;
}

std::unique_ptr<AttentionBackend> make_cpu_mla_backend() {
  return std::make_unique<CpuMlaBackend>();
}

}  // namespace attnkit
