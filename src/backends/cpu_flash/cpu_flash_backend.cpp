#include "backends/cpu_flash/cpu_flash_backend.h"

#include <string>

#include "backends/cpu_flash/cpu_flash_impl.h"
#include "backends/cpu_flash/cpu_flash_metadata.h"
#include "backends/cpu_flash/flash_attention.h"

namespace attnkit {
namespace {

class CpuFlashBackend final : public AttentionBackend {
 public:
  std::string_view name() const override { return "CPU_FLASH"; }
  std::string_view description() const override {
    return "tiled online-softmax (flash) attention on the CPU: AVX-512/AVX2/portable kernels "
           "chosen at run time, OpenMP threads, GQA packing, split-KV decode";
  }
  const BackendCapabilities& capabilities() const override { return cpu_flash_capabilities(); }
  std::unique_ptr<MetadataBuilder> make_builder(const KvCacheSpec& /*spec*/,
                                                const AttentionLayerParams& layer) const override {
    return std::make_unique<cpu::CpuFlashBuilder>(layer);
  }
  std::unique_ptr<AttentionImpl> make_impl(const AttentionLayerParams& layer) const override {
    return std::make_unique<cpu::CpuFlashImpl>(layer);
  }

 protected:
  std::vector<std::string> check_combination(const SelectorConfig& c,
                                             const Platform& /*platform*/) const override {
    std::vector<std::string> reasons;
    // The capability list checks head_size only; the kernels need the same of head_size_v.
    if (c.head_size_v % cpu::kHeadSizeMultiple != 0 || c.head_size_v < cpu::kHeadSizeMultiple ||
        c.head_size_v > cpu::kMaxHeadSize) {
      reasons.push_back("head_size_v " + std::to_string(c.head_size_v) +
                        " not supported (supported: multiples of 16 up to " +
                        std::to_string(cpu::kMaxHeadSize) + ")");
    }
    if (c.num_heads > 0 && c.num_kv_heads > 0 && c.num_heads % c.num_kv_heads != 0) {
      reasons.push_back("num_heads " + std::to_string(c.num_heads) +
                        " is not a multiple of num_kv_heads " + std::to_string(c.num_kv_heads));
    }
    if (c.use_mla && c.head_size_v > c.head_size) {
      reasons.push_back("MLA head_size_v " + std::to_string(c.head_size_v) +
                        " exceeds the latent width " + std::to_string(c.head_size));
    }
    return reasons;
  }
};

}  // namespace

const BackendCapabilities& cpu_flash_capabilities() {
  static const BackendCapabilities caps = [] {
    BackendCapabilities c;
    c.platform = PlatformKind::kCpu;
    c.dtypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
    c.kv_cache_dtypes = {KvCacheDType::kFloat32, KvCacheDType::kFloat16, KvCacheDType::kBFloat16,
                         KvCacheDType::kFp8E4M3, KvCacheDType::kFp8E5M2};
    c.head_sizes =
        SizeRule::multiple(cpu::kHeadSizeMultiple, cpu::kHeadSizeMultiple, cpu::kMaxHeadSize);
    c.separate_v_head_size = true;
    c.kernel_block_sizes = SizeRule::any();  // block pointers are walked per key
    c.preferred_block_size = 16;
    c.attention_types = {AttentionType::kDecoder, AttentionType::kEncoder,
                         AttentionType::kEncoderOnly, AttentionType::kEncoderDecoder};
    c.mla = true;
    c.sliding_window = true;
    c.chunked_local = true;
    c.sinks = true;
    c.soft_cap = true;
    c.non_causal = true;
    // Split-KV decode changes the summation order with the batch: not batch invariant.
    c.batch_invariant = false;
    return c;
  }();
  return caps;
}

std::unique_ptr<AttentionBackend> make_cpu_flash_backend() {
  return std::make_unique<CpuFlashBackend>();
}

}  // namespace attnkit
