#include "attnkit/selector/priority.h"

#include <fmt/format.h>

#include <algorithm>

namespace attnkit {
namespace {

// "8.0" for 80.
std::string format_cc(int cc) { return fmt::format("{}.{}", cc / 10, cc % 10); }

}  // namespace

std::span<const PriorityRule> builtin_priority_rules() {
  static const std::vector<PriorityRule> rules = [] {
    const auto when = [](PlatformKind platform, std::optional<bool> mla) {
      PriorityCondition c;
      c.platform = platform;
      c.mla = mla;
      return c;
    };
    // MLA layers try the latent-KV kernels first (CPU_MLA and CUDA_MLA are MLA-only); the
    // general backends stay on the list so that a report says why each of them cannot
    // serve the layer either.
    return std::vector<PriorityRule>{
        {"cpu-mla", when(PlatformKind::kCpu, true), {"CPU_MLA", "CPU_FLASH", "REFERENCE"}},
        {"cpu", when(PlatformKind::kCpu, std::nullopt), {"CPU_FLASH", "REFERENCE"}},
        {"cuda-mla", when(PlatformKind::kCuda, true), {"CUDA_MLA", "CUDA_FLASH", "CUDA_PAGED"}},
        {"cuda", when(PlatformKind::kCuda, std::nullopt), {"CUDA_FLASH", "CUDA_PAGED"}},
    };
  }();
  return rules;
}

std::vector<std::string> builtin_priority(PlatformKind platform, bool use_mla) {
  SelectorConfig layer;
  layer.use_mla = use_mla;
  for (const PriorityRule& rule : builtin_priority_rules()) {
    if (rule.when.matches(layer, platform)) return rule.order;
  }
  return {};
}

std::vector<std::string> builtin_state_priority() {
  return {"MAMBA1", "MAMBA2", "GDN_ATTN", "KDA_ATTN", "SHORT_CONV", "LINEAR", "RG_LRU"};
}

PriorityDecision priority_for(const BackendRegistry& registry, const Platform& platform,
                              const SelectorConfig& config,
                              std::span<const PriorityRule> user_rules) {
  PriorityDecision decision;
  std::vector<std::string> wanted;
  if (config.state) {
    decision.rule = "state";
    decision.condition = "state layer";
    wanted = builtin_state_priority();
  } else {
    const PriorityRule* builtin = nullptr;
    for (const PriorityRule& rule : builtin_priority_rules()) {
      if (rule.when.matches(config, platform.kind)) {
        builtin = &rule;
        break;
      }
    }
    const PriorityRule* user = nullptr;
    for (const PriorityRule& rule : user_rules) {
      if (rule.when.matches(config, platform.kind)) {
        user = &rule;
        break;
      }
    }
    const PriorityRule* chosen = user != nullptr ? user : builtin;
    if (chosen != nullptr) {
      decision.rule = chosen->name;
      decision.condition = chosen->when.describe();
      decision.from_config = chosen == user;
      wanted = chosen->order;
    }
    if (builtin != nullptr && chosen != builtin) {
      wanted.insert(wanted.end(), builtin->order.begin(), builtin->order.end());
    }
  }
  std::vector<std::string>& out = decision.order;
  const auto listed = [&](const std::string& name) {
    return std::find(out.begin(), out.end(), name) != out.end();
  };
  for (const std::string& name : wanted) {
    if (registry.contains(name) && !listed(name)) out.push_back(name);
  }
  // Names with a place in some built-in list keep that place (or none, like CUDA_MLA for a
  // non-MLA layer), also when a test or application registered them at run time.
  std::vector<std::string> placed = builtin_state_priority();
  for (const PriorityRule& rule : builtin_priority_rules()) {
    placed.insert(placed.end(), rule.order.begin(), rule.order.end());
  }
  for (const std::string& name : registry.names()) {
    if (registry.is_builtin_name(name) || listed(name)) continue;
    if (std::find(placed.begin(), placed.end(), name) != placed.end()) continue;
    const BackendCapabilities& caps = registry.get(name)->capabilities();
    if (caps.platform != platform.kind) continue;
    // A run-time backend joins the list of the layers of its sort (attention or state).
    if (caps.state_layer_types.empty() == config.state.has_value()) continue;
    out.push_back(name);
  }
  return decision;
}

std::vector<std::string> priority_list(const BackendRegistry& registry, const Platform& platform,
                                       const SelectorConfig& config) {
  return priority_for(registry, platform, config).order;
}

std::vector<std::string> platform_reasons(const AttentionBackend& backend, const Platform& platform,
                                          bool include_binary) {
  std::vector<std::string> reasons;
  const BackendCapabilities& caps = backend.capabilities();
  // Same wording as validate_capabilities(), which checks these per layer.
  if (caps.platform != platform.kind) {
    reasons.push_back(
        fmt::format("runs on {}, not on {}", to_string(caps.platform), platform.to_string()));
    return reasons;
  }
  if (platform.kind == PlatformKind::kCuda) {
    const int cc = platform.compute_capability();
    if (caps.min_compute_capability > 0 && cc < caps.min_compute_capability) {
      reasons.push_back(fmt::format("compute capability {} is below the minimum {}", format_cc(cc),
                                    format_cc(caps.min_compute_capability)));
    }
    if (caps.max_compute_capability > 0 && cc > caps.max_compute_capability) {
      reasons.push_back(fmt::format("compute capability {} is above the maximum {}", format_cc(cc),
                                    format_cc(caps.max_compute_capability)));
    }
  }
  if (include_binary) {
    if (std::optional<std::string> why = backend.binary_reason(platform)) {
      reasons.push_back(*why);
    }
  }
  return reasons;
}

}  // namespace attnkit
