// The typed JSON of a backend's capabilities (`attnkit backends --json`). Every value is
// data a program can compare against: numbers, lists of names, booleans, rule objects.

#include <algorithm>
#include <nlohmann/json.hpp>

#include "attnkit/backend/capabilities.h"

namespace attnkit {
namespace {

template <typename E>
nlohmann::json names(const std::vector<E>& values) {
  nlohmann::json out = nlohmann::json::array();
  for (E v : values) out.push_back(std::string(to_string(v)));
  return out;
}

// major*10+minor as {"major", "minor"}; 0 (unbounded) as null.
nlohmann::json compute_capability(int cc) {
  if (cc == 0) return nullptr;
  return {{"major", cc / 10}, {"minor", cc % 10}};
}

}  // namespace

nlohmann::json to_json(const SizeRule& rule) {
  if (!rule.exact.empty()) return {{"values", rule.exact}};
  return {{"multiple_of", std::max(rule.multiple_of, 1)},
          {"min", rule.min},
          {"max", rule.max > 0 ? nlohmann::json(rule.max) : nlohmann::json(nullptr)}};
}

nlohmann::json to_json(const BackendCapabilities& caps) {
  nlohmann::json cc = nullptr;
  if (caps.platform == PlatformKind::kCuda) {
    cc = {{"min", compute_capability(caps.min_compute_capability)},
          {"max", compute_capability(caps.max_compute_capability)}};
  }
  return {
      {"platform", std::string(to_string(caps.platform))},
      {"compute_capability", cc},
      {"dtypes", names(caps.dtypes)},
      {"kv_cache_dtypes", names(caps.kv_cache_dtypes)},
      {"head_sizes", to_json(caps.head_sizes)},
      {"separate_v_head_size", caps.separate_v_head_size},
      {"kernel_block_sizes", to_json(caps.kernel_block_sizes)},
      {"preferred_block_size", caps.preferred_block_size},
      {"attention_types", names(caps.attention_types)},
      {"mla", caps.mla},
      {"mla_only", caps.mla_only},
      {"sliding_window", caps.sliding_window},
      {"chunked_local", caps.chunked_local},
      {"sinks", caps.sinks},
      {"sink_tokens", caps.sink_tokens},
      {"soft_cap", caps.soft_cap},
      {"non_causal", caps.non_causal},
      {"batch_invariant", caps.batch_invariant},
      {"kv_connector", caps.kv_connector},
      // The layout the kernels read, and whether they read only that one (else either).
      {"kv_layout", std::string(to_string(caps.required_layout.value_or(KvLayout::kNHD)))},
      {"kv_layout_required", caps.required_layout.has_value()},
      {"cuda_graphs", to_string(caps.cuda_graphs)},
      {"state_layer_types", names(caps.state_layer_types)},
  };
}

}  // namespace attnkit
