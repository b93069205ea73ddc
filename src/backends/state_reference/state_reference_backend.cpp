// The state backends' declarations: one layer type each, CPU, every compute dtype.

#include "backends/state_reference/state_reference_backend.h"

#include "backends/state_reference/state_reference_impl.h"

namespace attnkit {
namespace {

BackendCapabilities state_capabilities(StateLayerType type) {
  BackendCapabilities caps;
  caps.platform = PlatformKind::kCpu;
  caps.dtypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
  caps.state_layer_types = {type};
  // One block holds one request's state: the block size counts requests, not tokens.
  caps.kernel_block_sizes = SizeRule::list({1});
  caps.preferred_block_size = 1;
  // Each request's rows are computed from its own state alone, whatever the batch.
  caps.batch_invariant = true;
  return caps;
}

class StateReferenceBackend final : public AttentionBackend {
 public:
  StateReferenceBackend(StateLayerType type, std::string_view name, std::string_view description)
      : name_(name), description_(description), caps_(state_capabilities(type)) {}

  std::string_view name() const override { return name_; }
  std::string_view description() const override { return description_; }
  const BackendCapabilities& capabilities() const override { return caps_; }
  std::unique_ptr<MetadataBuilder> make_builder(const KvCacheSpec& /*spec*/,
                                                const AttentionLayerParams& layer) const override {
    return make_state_builder(layer, name_);
  }
  std::unique_ptr<AttentionImpl> make_impl(const AttentionLayerParams& layer) const override {
    return make_state_impl(layer, name_);
  }

 private:
  std::string_view name_;
  std::string_view description_;
  BackendCapabilities caps_;
};

}  // namespace

std::unique_ptr<AttentionBackend> make_mamba1_backend() {
  return std::make_unique<StateReferenceBackend>(
      StateLayerType::kMamba1, "MAMBA1",
      "exact CPU selective scan (Mamba1: Jamba, Falcon-Mamba), double accumulation");
}
std::unique_ptr<AttentionBackend> make_mamba2_backend() {
  return std::make_unique<StateReferenceBackend>(
      StateLayerType::kMamba2, "MAMBA2",
      "exact CPU SSD scan (Mamba2: Bamba, Nemotron-H, Falcon-H1, Granite-4), double "
      "accumulation");
}
std::unique_ptr<AttentionBackend> make_gdn_attn_backend() {
  return std::make_unique<StateReferenceBackend>(
      StateLayerType::kGatedDeltaNet, "GDN_ATTN",
      "exact CPU gated delta rule (Qwen3-Next), double accumulation");
}
std::unique_ptr<AttentionBackend> make_kda_attn_backend() {
  return std::make_unique<StateReferenceBackend>(
      StateLayerType::kKimiDeltaAttention, "KDA_ATTN",
      "exact CPU delta rule with per-channel gates (Kimi-Linear), double accumulation");
}
std::unique_ptr<AttentionBackend> make_short_conv_backend() {
  return std::make_unique<StateReferenceBackend>(
      StateLayerType::kShortConv, "SHORT_CONV",
      "exact CPU gated short convolution (LFM2), double accumulation");
}
std::unique_ptr<AttentionBackend> make_linear_backend() {
  return std::make_unique<StateReferenceBackend>(
      StateLayerType::kLinearAttention, "LINEAR",
      "exact CPU decayed linear attention (MiniMax lightning attention), double accumulation");
}
std::unique_ptr<AttentionBackend> make_rg_lru_backend() {
  return std::make_unique<StateReferenceBackend>(
      StateLayerType::kRgLru, "RG_LRU",
      "exact CPU real-gated linear recurrence (RecurrentGemma), double accumulation");
}

}  // namespace attnkit
