// The REFERENCE backend: declares everything, and its kernels (reference_kernels.h) really
// run everything it declares.

#include "backends/reference/reference_backend.h"

#include "backends/reference/reference_impl.h"

namespace attnkit {
namespace {

BackendCapabilities reference_capabilities() {
  BackendCapabilities caps;
  caps.platform = PlatformKind::kCpu;
  caps.dtypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
  caps.kv_cache_dtypes = {KvCacheDType::kFloat16, KvCacheDType::kBFloat16, KvCacheDType::kFloat32,
                          KvCacheDType::kFp8E4M3, KvCacheDType::kFp8E5M2};
  caps.head_sizes = SizeRule::any();
  caps.separate_v_head_size = true;
  caps.kernel_block_sizes = SizeRule::any();
  caps.preferred_block_size = 16;
  caps.attention_types = {AttentionType::kDecoder, AttentionType::kEncoder,
                          AttentionType::kEncoderOnly, AttentionType::kEncoderDecoder};
  caps.mla = true;
  caps.sliding_window = true;
  caps.chunked_local = true;
  caps.sinks = true;
  caps.soft_cap = true;
  caps.non_causal = true;
  // Every output row is computed on its own, in the same order, whatever the batch.
  caps.batch_invariant = true;
  // The cache is plain memory in the requested layout; a connector may read or fill it.
  caps.kv_connector = true;
  caps.required_layout = std::nullopt;  // NHD by default; HND accepted too
  return caps;
}

class ReferenceBackend final : public AttentionBackend {
 public:
  std::string_view name() const override { return "REFERENCE"; }
  std::string_view description() const override {
    return "exact, simple CPU attention (double accumulation) supporting every feature; the "
           "oracle for all tests";
  }
  const BackendCapabilities& capabilities() const override { return caps_; }
  std::unique_ptr<MetadataBuilder> make_builder(const KvCacheSpec& /*spec*/,
                                                const AttentionLayerParams& layer) const override {
    return make_reference_builder(layer);
  }
  std::unique_ptr<AttentionImpl> make_impl(const AttentionLayerParams& layer) const override {
    return make_reference_impl(layer);
  }

 private:
  BackendCapabilities caps_ = reference_capabilities();
};

}  // namespace

std::unique_ptr<AttentionBackend> make_reference_backend() {
  return std::make_unique<ReferenceBackend>();
}

}  // namespace attnkit
