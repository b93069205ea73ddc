// The REFERENCE plan (the common metadata, validated) and implementation: forward() runs
// the shared checks (backend/forward_check.h), writes this step's K/V into the cache
// through the slot mapping, then runs the reference attention kernel.

#include "backends/reference/reference_impl.h"

#include "attnkit/backend/forward_check.h"
#include "attnkit/backend/paged_params.h"
#include "backends/reference/reference_kernels.h"

namespace attnkit {
namespace {

class ReferencePlan final : public AttentionMetadata {
 public:
  const CommonAttentionMetadata& common() const override { return *common_; }
  void reset(const CommonAttentionMetadata& common) { common_ = &common; }

 private:
  const CommonAttentionMetadata* common_ = nullptr;
};

class ReferenceBuilder final : public MetadataBuilder {
 public:
  explicit ReferenceBuilder(const AttentionLayerParams& layer) : layer_(layer) {}
  const AttentionMetadata& build(const CommonAttentionMetadata& common,
                                 const ExecutionContext& /*ctx*/) override {
    check_common_metadata(common, layer_, "REFERENCE");
    plan_.reset(common);
    return plan_;
  }

 private:
  AttentionLayerParams layer_;
  ReferencePlan plan_;
};

constexpr ForwardCheckOptions kChecks{.backend = "REFERENCE"};

class ReferenceImpl final : public AttentionImpl {
 public:
  explicit ReferenceImpl(const AttentionLayerParams& layer) : layer_(layer) {}
  std::string_view backend_name() const override { return "REFERENCE"; }

  void forward(const TensorView& query, const TensorView& key, const TensorView& value,
               const KvCacheTensors& cache, const AttentionMetadata& metadata,
               const TensorView& output, const ExecutionContext& /*ctx*/) override {
    const ForwardArgs args{layer_, query, key, value, cache, metadata.common(), output};
    check_forward(args, kChecks);
    if (writes_cache(args)) reference_cache_update(cache_update_params_for(args));
    reference_paged_attention(paged_params_for(args));
    check_forward_outputs(args, kChecks);
  }

 private:
  AttentionLayerParams layer_;
};

}  // namespace

std::unique_ptr<MetadataBuilder> make_reference_builder(const AttentionLayerParams& layer) {
  return std::make_unique<ReferenceBuilder>(layer);
}

std::unique_ptr<AttentionImpl> make_reference_impl(const AttentionLayerParams& layer) {
  check_layer_params(layer, "REFERENCE");
  return std::make_unique<ReferenceImpl>(layer);
}

}  // namespace attnkit
