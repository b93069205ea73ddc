#include "attnkit/backend/backend.h"

namespace attnkit {

std::string_view to_string(Phase phase) {
  switch (phase) {
    case Phase::kPrefill:
      return "prefill";
    case Phase::kDecode:
      return "decode";
  }
  return "?";
}

std::vector<std::string> AttentionBackend::validate(const SelectorConfig& config,
                                                    const Platform& platform) const {
  std::vector<std::string> reasons = validate_capabilities(capabilities(), config, platform);
  // A state layer asked of an attention backend (or the reverse) has one reason; the
  // combination hook speaks of layers of the backend's own sort only.
  const bool serves_states = !capabilities().state_layer_types.empty();
  if (config.state.has_value() != serves_states) return reasons;
  for (std::string& r : check_combination(config, platform)) reasons.push_back(std::move(r));
  return reasons;
}

std::optional<std::string> AttentionBackend::binary_reason(const Platform& platform) const {
  if (capabilities().platform == PlatformKind::kCpu) return std::nullopt;
  std::string why = platform.kernels_in_binary_reason();
  if (why.empty()) return std::nullopt;
  return why;
}

KvLayout AttentionBackend::kv_layout() const {
  return capabilities().required_layout.value_or(KvLayout::kNHD);
}

int AttentionBackend::preferred_block_size(const KvCacheSpec& /*spec*/) const {
  return capabilities().preferred_block_size;
}

}  // namespace attnkit
