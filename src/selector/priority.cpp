#include "attnkit/selector/priority.h"

#include <fmt/format.h>

#include <algorithm>

namespace attnkit {
namespace {

// "8.0" for 80.
std::string format_cc(int cc) { return fmt::format("{}.{}", cc / 10, cc % 10); }

}  // namespace

std::vector<std::string> builtin_priority(PlatformKind platform, bool use_mla) {
  switch (platform) {
    case PlatformKind::kCpu:
      // MLA layers try the latent-KV kernels first (CPU_MLA is MLA-only).
      if (use_mla) return {"CPU_MLA", "CPU_FLASH", "REFERENCE"};
      return {"CPU_FLASH", "REFERENCE"};
    case PlatformKind::kCuda:
      // MLA layers try the latent-KV kernels first; the general backends stay on the list
      // so that a report says why each of them cannot serve the layer either.
      if (use_mla) return {"CUDA_MLA", "CUDA_FLASH", "CUDA_PAGED"};
      return {"CUDA_FLASH", "CUDA_PAGED"};
  }
  return {};
}

std::vector<std::string> builtin_state_priority() {
  return {"MAMBA1", "MAMBA2", "GDN_ATTN", "KDA_ATTN", "SHORT_CONV", "LINEAR", "RG_LRU"};
}

std::vector<std::string> priority_list(const BackendRegistry& registry, const Platform& platform,
                                       const SelectorConfig& config) {
  std::vector<std::string> out;
  const std::vector<std::string> builtin =
      config.state ? builtin_state_priority() : builtin_priority(platform.kind, config.use_mla);
  for (const std::string& name : builtin) {
    if (registry.contains(name)) out.push_back(name);
  }
  // Names with a place in some built-in list keep that place (or none, like CUDA_MLA for a
  // non-MLA layer), also when a test or application registered them at run time.
  std::vector<std::string> placed = builtin_state_priority();
  for (PlatformKind other : all_values<PlatformKind>()) {
    for (std::string& name : builtin_priority(other, /*use_mla=*/true))
      placed.push_back(std::move(name));
  }
  for (const std::string& name : registry.names()) {
    if (registry.is_builtin_name(name)) continue;
    if (std::find(placed.begin(), placed.end(), name) != placed.end()) continue;
    const BackendCapabilities& caps = registry.get(name)->capabilities();
    if (caps.platform != platform.kind) continue;
    // A run-time backend joins the list of the layers of its sort (attention or state).
    if (caps.state_layer_types.empty() == config.state.has_value()) continue;
    out.push_back(name);
  }
  return out;
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
