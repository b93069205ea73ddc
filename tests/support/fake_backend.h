#pragma once
// A test backend with chosen capabilities: validate() comes from the real capability
// checks (plus optional combination reasons); binary_reason() is nullopt (this binary can
// run it anywhere) unless a reason is set; the builder/impl factories are not meant to be
// called (selection never does).

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attnkit/backend/backend.h"
#include "attnkit/core/error.h"

namespace attnkit::testing {

class FakeBackend : public AttentionBackend {
 public:
  using CombinationHook =
      std::function<std::vector<std::string>(const SelectorConfig&, const Platform&)>;

  FakeBackend(std::string name, BackendCapabilities caps) : name_(std::move(name)), caps_(caps) {}

  std::string_view name() const override { return name_; }
  std::string_view description() const override { return "test backend"; }
  const BackendCapabilities& capabilities() const override { return caps_; }

  std::optional<std::string> binary_reason(const Platform& /*platform*/) const override {
    return forced_binary_reason_;
  }
  std::unique_ptr<MetadataBuilder> make_builder(
      const KvCacheSpec& /*spec*/, const AttentionLayerParams& /*layer*/) const override {
    throw Error(ErrorCode::kUnsupported, "FakeBackend has no metadata builder");
  }
  std::unique_ptr<AttentionImpl> make_impl(const AttentionLayerParams& /*layer*/) const override {
    throw Error(ErrorCode::kUnsupported, "FakeBackend has no implementation");
  }

  FakeBackend& with_binary_reason(std::string why) {
    forced_binary_reason_ = std::move(why);
    return *this;
  }
  FakeBackend& with_combination_hook(CombinationHook hook) {
    hook_ = std::move(hook);
    return *this;
  }

 protected:
  std::vector<std::string> check_combination(const SelectorConfig& config,
                                             const Platform& platform) const override {
    return hook_ ? hook_(config, platform) : std::vector<std::string>{};
  }

 private:
  std::string name_;
  BackendCapabilities caps_;
  std::optional<std::string> forced_binary_reason_;
  CombinationHook hook_;
};

// Capabilities that serve a plain bf16/fp16/fp32 decoder layer of any head size on `kind`.
inline BackendCapabilities basic_caps(PlatformKind kind = PlatformKind::kCpu) {
  BackendCapabilities caps;
  caps.platform = kind;
  caps.dtypes = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
  caps.kv_cache_dtypes = {};  // the compute dtype's own only
  if (kind == PlatformKind::kCuda) caps.min_compute_capability = 80;
  return caps;
}

// Capabilities that serve everything the selector can ask on `kind`.
inline BackendCapabilities full_caps(PlatformKind kind = PlatformKind::kCpu) {
  BackendCapabilities caps = basic_caps(kind);
  caps.kv_cache_dtypes = {KvCacheDType::kFloat16, KvCacheDType::kBFloat16, KvCacheDType::kFloat32,
                          KvCacheDType::kFp8E4M3, KvCacheDType::kFp8E5M2};
  caps.separate_v_head_size = true;
  caps.attention_types = {AttentionType::kDecoder, AttentionType::kEncoder,
                          AttentionType::kEncoderOnly, AttentionType::kEncoderDecoder};
  caps.mla = true;
  caps.sliding_window = caps.chunked_local = caps.sinks = caps.soft_cap = true;
  caps.non_causal = caps.batch_invariant = caps.kv_connector = true;
  return caps;
}

// A factory for register_backend() that counts how often it ran.
inline std::function<std::unique_ptr<AttentionBackend>()> fake_factory(
    std::string name, BackendCapabilities caps, std::shared_ptr<int> calls = nullptr) {
  return [name = std::move(name), caps, calls]() -> std::unique_ptr<AttentionBackend> {
    if (calls) ++*calls;
    return std::make_unique<FakeBackend>(name, caps);
  };
}

}  // namespace attnkit::testing
