#include "attnkit/selector/selector.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "attnkit/core/error.h"
#include "attnkit/selector/priority.h"

namespace attnkit {
namespace {

// Validates `name` for the layer. On a local platform a missing kernel in this binary is a
// rejection reason; on a described one it is only a note.
CandidateReport evaluate(const BackendRegistry& registry, const std::string& name,
                         const SelectorConfig& layer, const Platform& platform) {
  CandidateReport report;
  report.backend = name;
  const std::shared_ptr<const AttentionBackend> backend = registry.get(name);
  report.reasons = backend->validate(layer, platform);
  if (backend->capabilities().platform == platform.kind) {
    if (std::optional<std::string> why = backend->binary_reason(platform)) {
      if (platform.is_local) {
        report.reasons.push_back(*why);
      } else {
        report.binary_note = *why;
      }
    }
  }
  return report;
}

std::string describe_choice_source(ChosenBy chosen_by, KvCacheKind kind) {
  switch (chosen_by) {
    case ChosenBy::kPerKind:
      return fmt::format("backend_per_kind['{}']", to_string(kind));
    case ChosenBy::kGlobal:
      return "the attention config's 'backend'";
    case ChosenBy::kEnv:
      return kAttentionBackendEnvVar;
    case ChosenBy::kAuto:
      break;
  }
  return "automatic selection";
}

std::string describe_layer(const SelectorConfig& layer, KvCacheKind kind,
                           const Platform& platform) {
  return fmt::format("{} layer ({}) on {}", to_string(kind), layer.describe(),
                     platform.to_string());
}

// "User block size 32 precluded ..." warnings: a higher-priority candidate that was rejected
// only because of the user's block size (valid with the block size left to the backend).
void add_block_size_warnings(const BackendRegistry& registry, const SelectorConfig& layer,
                             const Platform& platform, const std::vector<CandidateReport>& walk,
                             const std::string& chosen, std::vector<std::string>& warnings) {
  if (!layer.block_size) return;
  SelectorConfig free_block = layer;
  free_block.block_size.reset();
  for (const CandidateReport& candidate : walk) {
    if (candidate.backend == chosen) break;
    const CandidateReport without = evaluate(registry, candidate.backend, free_block, platform);
    if (!without.valid()) continue;
    std::vector<std::string> block_reasons;
    for (const std::string& reason : candidate.reasons) {
      if (std::find(without.reasons.begin(), without.reasons.end(), reason) ==
          without.reasons.end()) {
        block_reasons.push_back(reason);
      }
    }
    warnings.push_back(fmt::format(
        "User block size {} precluded higher-priority backend {} ({}); selected {} instead",
        *layer.block_size, candidate.backend, fmt::join(block_reasons, "; "), chosen));
  }
}

std::string list_candidates(const std::vector<CandidateReport>& candidates) {
  std::string out;
  for (const CandidateReport& candidate : candidates) {
    out += fmt::format("\n  {}{}: {}", candidate.backend,
                       candidate.user_choice ? " (user choice)" : "",
                       candidate.valid() ? std::string("valid")
                                         : fmt::format("{}", fmt::join(candidate.reasons, "; ")));
  }
  return out;
}

}  // namespace

std::string_view to_string(ChosenBy chosen_by) {
  switch (chosen_by) {
    case ChosenBy::kAuto:
      return "auto";
    case ChosenBy::kGlobal:
      return "global";
    case ChosenBy::kPerKind:
      return "per_kind";
    case ChosenBy::kEnv:
      return "env";
  }
  return "?";
}

Selector::Selector(AttentionConfig config, const BackendRegistry& registry)
    : config_(std::move(config)), registry_(&registry), cache_(std::make_unique<Cache>()) {}

std::pair<std::string, ChosenBy> Selector::choice_for(KvCacheKind kind) const {
  if (auto it = config_.backend_per_kind.find(kind); it != config_.backend_per_kind.end()) {
    if (it->second == kAutoBackend) return {std::string(kAutoBackend), ChosenBy::kAuto};
    return {it->second, ChosenBy::kPerKind};
  }
  if (config_.backend != kAutoBackend) {
    return {config_.backend,
            config_.backend_source == BackendSource::kEnv ? ChosenBy::kEnv : ChosenBy::kGlobal};
  }
  return {std::string(kAutoBackend), ChosenBy::kAuto};
}

size_t Selector::cache_size() const {
  std::lock_guard lock(cache_->mutex);
  return cache_->entries.size();
}

std::shared_ptr<const SelectionResult> Selector::select(const SelectorConfig& layer,
                                                        const Platform& platform) const {
  auto [choice, chosen_by] = choice_for(kind_of(layer));
  CacheKey key{std::move(choice),    chosen_by,         layer,
               platform.to_string(), platform.is_local, registry_->generation()};
  std::lock_guard lock(cache_->mutex);
  for (const auto& [cached_key, result] : cache_->entries) {
    if (cached_key == key) return result;
  }
  auto result = std::make_shared<const SelectionResult>(compute(layer, platform));
  for (const std::string& warning : result->warnings) spdlog::warn("{}", warning);
  cache_->entries.emplace_back(std::move(key), result);
  return result;
}

SelectionResult Selector::compute(const SelectorConfig& layer, const Platform& platform) const {
  SelectionResult result;
  result.kind = kind_of(layer);
  result.config = layer;
  result.platform = platform.to_string();
  result.platform_is_local = platform.is_local;
  result.override_mode = config_.override_mode;
  const auto [choice, chosen_by] = choice_for(result.kind);
  result.requested = choice;

  const CandidateReport* chosen = nullptr;
  if (choice != kAutoBackend) {
    CandidateReport user = evaluate(*registry_, choice, layer, platform);
    user.user_choice = true;
    result.candidates.push_back(std::move(user));
    const CandidateReport& mine = result.candidates.back();
    if (mine.valid()) {
      chosen = &mine;
      result.chosen_by = chosen_by;
    } else if (config_.override_mode == OverrideMode::kStrict) {
      throw Error(
          ErrorCode::kUnsupported,
          fmt::format("Backend {} (chosen by {}) cannot serve this {}: {}. Set "
                      "override_mode to 'prefer' to fall back to automatic selection.",
                      choice, describe_choice_source(chosen_by, result.kind),
                      describe_layer(layer, result.kind, platform), fmt::join(mine.reasons, "; ")));
    } else {
      result.warnings.push_back(
          fmt::format("Backend {} (chosen by {}) cannot serve this {}: {}; falling back to "
                      "automatic selection (override_mode 'prefer')",
                      choice, describe_choice_source(chosen_by, result.kind),
                      describe_layer(layer, result.kind, platform), fmt::join(mine.reasons, "; ")));
    }
  }

  if (chosen == nullptr) {
    const size_t walk_begin = result.candidates.size();
    for (const std::string& name : priority_list(*registry_, platform, layer)) {
      result.candidates.push_back(evaluate(*registry_, name, layer, platform));
    }
    const auto walk_first = result.candidates.begin() + static_cast<ptrdiff_t>(walk_begin);
    const auto found = std::find_if(walk_first, result.candidates.end(),
                                    [](const CandidateReport& c) { return c.valid(); });
    if (found == result.candidates.end()) {
      throw Error(ErrorCode::kUnsupported,
                  fmt::format("No attention backend can serve this {}. Candidates:{}",
                              describe_layer(layer, result.kind, platform),
                              result.candidates.empty() ? std::string("\n  (none registered)")
                                                        : list_candidates(result.candidates)));
    }
    chosen = &*found;
    result.chosen_by = ChosenBy::kAuto;
    add_block_size_warnings(*registry_, layer, platform,
                            std::vector<CandidateReport>(walk_first, result.candidates.end()),
                            found->backend, result.warnings);
  }

  result.backend = chosen->backend;
  result.chosen = registry_->get(result.backend);
  result.runnable = !chosen->binary_note.has_value();
  result.binary_reason = chosen->binary_note;
  return result;
}

}  // namespace attnkit
