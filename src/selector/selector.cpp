#include "attnkit/selector/selector.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <array>

#include "attnkit/backend/composite_backend.h"
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
    case ChosenBy::kTuned:
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
    case ChosenBy::kTuned:
      return "tuned";
  }
  return "?";
}

Selector::Selector(AttentionConfig config, const BackendRegistry& registry,
                   std::shared_ptr<const Tuning> tuning)
    : config_(std::move(config)),
      registry_(&registry),
      tuning_(std::move(tuning)),
      cache_(std::make_unique<Cache>()) {}

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

PhaseChoice Selector::phase_choice_for(KvCacheKind kind) const {
  // Not a structured binding: the lambda below captures it (clang before 16 refuses that).
  const std::pair<std::string, ChosenBy> base_choice = choice_for(kind);
  const auto object = config_.phase_backends_per_kind.find(kind);
  const bool kind_named = config_.backend_per_kind.count(kind) > 0;
  const auto pick = [&](const std::optional<std::string> PhaseBackends::*phase) {
    if (object != config_.phase_backends_per_kind.end() && (object->second.*phase)) {
      const std::string& name = *(object->second.*phase);
      return std::pair{name, name == kAutoBackend ? ChosenBy::kAuto : ChosenBy::kPerKind};
    }
    if (!kind_named && (config_.phase_backends.*phase)) {
      const std::string& name = *(config_.phase_backends.*phase);
      return std::pair{name, name == kAutoBackend ? ChosenBy::kAuto : ChosenBy::kGlobal};
    }
    return std::pair{base_choice.first, base_choice.second};
  };
  const auto [prefill, prefill_by] = pick(&PhaseBackends::prefill);
  const auto [decode, decode_by] = pick(&PhaseBackends::decode);
  PhaseChoice out;
  out.prefill = prefill;
  out.decode = decode;
  // "tuned" from a phase key tunes each phase on its own buckets (a composite when the
  // phases' fastest differ), also when both phases say "tuned".
  const bool phase_key_tuned =
      (object != config_.phase_backends_per_kind.end() &&
       (object->second.prefill == kTunedBackend || object->second.decode == kTunedBackend)) ||
      (!kind_named && (config_.phase_backends.prefill == kTunedBackend ||
                       config_.phase_backends.decode == kTunedBackend));
  out.tuned_per_phase = phase_key_tuned && (prefill == kTunedBackend || decode == kTunedBackend);
  // The most specific source of the two.
  for (ChosenBy by : {ChosenBy::kPerKind, ChosenBy::kGlobal, ChosenBy::kEnv}) {
    if (prefill_by == by || decode_by == by) {
      out.chosen_by = by;
      break;
    }
  }
  return out;
}

size_t Selector::cache_size() const {
  std::lock_guard lock(cache_->mutex);
  return cache_->entries.size();
}

std::shared_ptr<const SelectionResult> Selector::select(const SelectorConfig& layer,
                                                        const Platform& platform) const {
  const PhaseChoice phases = phase_choice_for(kind_of(layer));
  std::string choice = phases.split() || phases.tuned_per_phase
                           ? composite_name(phases.prefill, phases.decode)
                           : phases.prefill;
  CacheKey key{std::move(choice),    phases.chosen_by,  layer,
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
  const PhaseChoice phases = phase_choice_for(result.kind);
  if (phases.split() || phases.tuned_per_phase) {
    compute_split(phases, layer, platform, result);
    return result;
  }
  const std::string& choice = phases.prefill;
  const ChosenBy chosen_by = phases.chosen_by;
  result.requested = choice;
  if (choice == kTunedBackend) {
    select_tuned(layer, platform, result);
    return result;
  }

  if (choice != kAutoBackend) {
    CandidateReport user = evaluate(*registry_, choice, layer, platform);
    user.user_choice = true;
    result.candidates.push_back(std::move(user));
    const CandidateReport& mine = result.candidates.back();
    if (mine.valid()) {
      result.chosen_by = chosen_by;
      choose(mine, result);
      return result;
    }
    if (config_.override_mode == OverrideMode::kStrict) {
      throw Error(
          ErrorCode::kUnsupported,
          fmt::format("Backend {} (chosen by {}) cannot serve this {}: {}. Set "
                      "override_mode to 'prefer' to fall back to automatic selection.",
                      choice, describe_choice_source(chosen_by, result.kind),
                      describe_layer(layer, result.kind, platform), fmt::join(mine.reasons, "; ")));
    }
    result.warnings.push_back(
        fmt::format("Backend {} (chosen by {}) cannot serve this {}: {}; falling back to "
                    "automatic selection (override_mode 'prefer')",
                    choice, describe_choice_source(chosen_by, result.kind),
                    describe_layer(layer, result.kind, platform), fmt::join(mine.reasons, "; ")));
  }
  select_automatically(layer, platform, result);
  return result;
}

void Selector::choose(const CandidateReport& chosen, SelectionResult& result) const {
  result.backend = chosen.backend;
  result.chosen = registry_->get(result.backend);
  result.runnable = !chosen.binary_note.has_value();
  result.binary_reason = chosen.binary_note;
}

TuningReport Selector::tune(const std::vector<std::shared_ptr<const AttentionBackend>>& valid,
                            const SelectorConfig& layer, const Platform& platform,
                            std::optional<Phase> phase, const std::string& fallback) const {
  TuningReport report;
  report.phase = phase;
  const std::shared_ptr<const Tuning> tuning =
      tuning_ != nullptr ? tuning_ : std::make_shared<const Tuning>();
  report.cache_path = tuning->cache_path();
  if (!platform.is_local) {
    report.why = fmt::format(
        "{} is only described: timings are of this machine's devices; "
        "automatic selection ({}) stands",
        platform.to_string(), fallback);
    return report;
  }
  if (layer.state || layer.use_mla || layer.attn_type != AttentionType::kDecoder) {
    report.why = fmt::format(
        "tuning times decoder self-attention layers (not MLA, state, "
        "encoder or cross attention layers); automatic selection ({}) "
        "stands",
        fallback);
    return report;
  }
  tuning->time_candidates(valid, layer, platform, report, phase);
  if (report.timings.empty() || report.timings.size() != valid.size()) {
    report.why = fmt::format(
        "not every valid backend has a time for this device and binary in {}: automatic "
        "selection ({}) stands; `attnkit tune` measures them",
        tuning->cache_path(), fallback);
    return report;
  }
  const CandidateTiming& best = report.timings.front();
  if (report.timings.size() == 1) {
    report.why =
        fmt::format("{} is the only valid backend ({:.1f} us over {} bucket{})", best.backend,
                    best.total_us, best.median_us.size(), best.median_us.size() == 1 ? "" : "s");
  } else {
    const CandidateTiming& next = report.timings[1];
    report.why = fmt::format(
        "{} is fastest: {:.1f} us over {} bucket{} against {:.1f} us for {} ({:.2f}x)",
        best.backend, best.total_us, best.median_us.size(), best.median_us.size() == 1 ? "" : "s",
        next.total_us, next.backend, best.total_us > 0 ? next.total_us / best.total_us : 0.0);
  }
  report.winner = best.backend;
  return report;
}

void Selector::select_tuned(const SelectorConfig& layer, const Platform& platform,
                            SelectionResult& result) const {
  select_automatically(layer, platform, result);  // every candidate validated; the fallback
  std::vector<std::shared_ptr<const AttentionBackend>> valid;
  for (const CandidateReport& c : result.candidates) {
    if (c.valid() && !c.binary_note) valid.push_back(registry_->get(c.backend));
  }
  TuningReport report = tune(valid, layer, platform, std::nullopt, result.backend);
  if (report.winner) {
    const auto it =
        std::find_if(result.candidates.begin(), result.candidates.end(),
                     [&](const CandidateReport& c) { return c.backend == *report.winner; });
    choose(*it, result);
    result.chosen_by = ChosenBy::kTuned;
  }
  result.tuning = std::move(report);
}

void Selector::select_automatically(const SelectorConfig& layer, const Platform& platform,
                                    SelectionResult& result) const {
  const size_t walk_begin = result.candidates.size();
  result.priority = priority_for(*registry_, platform, layer, config_.priority);
  for (const std::string& name : result.priority->order) {
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
  result.chosen_by = ChosenBy::kAuto;
  add_block_size_warnings(*registry_, layer, platform,
                          std::vector<CandidateReport>(walk_first, result.candidates.end()),
                          found->backend, result.warnings);
  choose(*found, result);
}

std::string Selector::phase_source(KvCacheKind kind, Phase phase) const {
  const auto member = phase == Phase::kPrefill ? &PhaseBackends::prefill : &PhaseBackends::decode;
  const std::string key = fmt::format("{}_backend", to_string(phase));
  if (auto it = config_.phase_backends_per_kind.find(kind);
      it != config_.phase_backends_per_kind.end() && it->second.*member) {
    return fmt::format("backend_per_kind['{}'].{}", to_string(kind), key);
  }
  if (config_.backend_per_kind.count(kind) == 0 && config_.phase_backends.*member) {
    return fmt::format("the attention config's '{}'", key);
  }
  const auto [name, chosen_by] = choice_for(kind);
  return describe_choice_source(chosen_by, kind);
}

void Selector::compute_split(const PhaseChoice& choice, const SelectorConfig& layer,
                             const Platform& platform, SelectionResult& result) const {
  result.requested = composite_name(choice.prefill, choice.decode);
  const std::string source = describe_choice_source(choice.chosen_by, result.kind);
  const std::string what = describe_layer(layer, result.kind, platform);
  const bool strict = config_.override_mode == OverrideMode::kStrict;
  constexpr std::array<Phase, 2> kPhases{Phase::kPrefill, Phase::kDecode};
  std::array<std::string, 2> picked{choice.prefill, choice.decode};  // by kPhases' order
  std::array<std::optional<std::string>, 2> notes;
  bool kept_user_choice = false;

  const auto chosen_later = [](const std::string& name) {
    return name == kAutoBackend || name == kTunedBackend;
  };
  // 1. The phases the user named: each must serve the layer alone.
  for (size_t i = 0; i < 2; ++i) {
    if (chosen_later(picked[i])) continue;
    CandidateReport user = evaluate(*registry_, picked[i], layer, platform);
    user.user_choice = true;
    user.phase = kPhases[i];
    if (user.valid()) {
      kept_user_choice = true;
      notes[i] = user.binary_note;
    } else {
      const std::string message =
          fmt::format("Backend {} ({} rows, chosen by {}) cannot serve this {}: {}", picked[i],
                      to_string(kPhases[i]), phase_source(result.kind, kPhases[i]), what,
                      fmt::join(user.reasons, "; "));
      if (strict) {
        throw Error(ErrorCode::kUnsupported,
                    message +
                        ". Set override_mode to 'prefer' to fall back to automatic "
                        "selection.");
      }
      result.warnings.push_back(fmt::format(
          "{}; falling back to automatic selection for {} rows (override_mode 'prefer')", message,
          to_string(kPhases[i])));
      picked[i] = kAutoBackend;
    }
    result.candidates.push_back(std::move(user));
  }
  if (picked[0] == kAutoBackend && picked[1] == kAutoBackend) {
    select_automatically(layer, platform, result);
    return;
  }

  // 2. A phase left to automatic selection takes the first valid backend of the priority
  //    list that pairs with the other phase's (when that one is named or already chosen);
  //    a "tuned" phase the fastest of them on its own phase's buckets.
  bool tuned_any = false;
  for (size_t i = 0; i < 2; ++i) {
    if (!chosen_later(picked[i])) continue;
    const bool tuned = picked[i] == kTunedBackend;
    const std::string other = picked[1 - i];
    const bool other_fixed = !chosen_later(other);
    const std::shared_ptr<const AttentionBackend> other_backend =
        other_fixed ? registry_->get(other) : nullptr;
    const size_t walk_begin = result.candidates.size();
    result.priority = priority_for(*registry_, platform, layer, config_.priority);
    std::vector<std::shared_ptr<const AttentionBackend>> valid;
    for (const std::string& name : result.priority->order) {
      CandidateReport candidate = evaluate(*registry_, name, layer, platform);
      candidate.phase = kPhases[i];
      if (candidate.valid() && other_fixed && name != other) {
        const std::shared_ptr<const AttentionBackend> mine = registry_->get(name);
        const std::vector<std::string> pairing =
            i == 0 ? pairing_reasons(*mine, *other_backend, layer)
                   : pairing_reasons(*other_backend, *mine, layer);
        for (const std::string& reason : pairing) {
          candidate.reasons.push_back(fmt::format("does not pair with {} backend {}: {}",
                                                  to_string(kPhases[1 - i]), other, reason));
        }
      }
      if (candidate.valid() && !candidate.binary_note) valid.push_back(registry_->get(name));
      if (candidate.valid() && chosen_later(picked[i])) {
        picked[i] = name;  // the automatic choice (a tuned phase's fallback)
        notes[i] = candidate.binary_note;
      }
      result.candidates.push_back(std::move(candidate));
    }
    if (chosen_later(picked[i])) {
      throw Error(ErrorCode::kUnsupported,
                  fmt::format("No attention backend can serve the {} rows of this {}{}. "
                              "Candidates:{}",
                              to_string(kPhases[i]), what,
                              other_fixed ? fmt::format(" beside {} backend {}",
                                                        to_string(kPhases[1 - i]), other)
                                          : std::string(),
                              list_candidates(std::vector<CandidateReport>(
                                  result.candidates.begin() + static_cast<ptrdiff_t>(walk_begin),
                                  result.candidates.end()))));
    }
    if (tuned) {
      TuningReport report = tune(valid, layer, platform, kPhases[i], picked[i]);
      if (report.winner) {
        picked[i] = *report.winner;
        notes[i].reset();
        tuned_any = true;
      }
      result.phase_tuning.push_back(std::move(report));
    }
  }
  result.chosen_by = tuned_any          ? ChosenBy::kTuned
                     : kept_user_choice ? choice.chosen_by
                                        : ChosenBy::kAuto;

  // 3. One backend for both phases after all, or the pair over one KV cache.
  if (picked[0] == picked[1]) {
    result.backend = picked[0];
    result.chosen = registry_->get(picked[0]);
  } else {
    std::shared_ptr<const AttentionBackend> composite =
        make_composite_backend(registry_->get(picked[0]), registry_->get(picked[1]));
    CandidateReport pair;
    pair.backend = std::string(composite->name());
    pair.reasons = composite->validate(layer, platform);
    pair.user_choice = kept_user_choice;
    if (!pair.valid()) {
      const std::string message = fmt::format(
          "Prefill backend {} and decode backend {} (chosen by {}) cannot share one KV cache "
          "for this {}: {}",
          picked[0], picked[1], source, what, fmt::join(pair.reasons, "; "));
      if (strict) {
        throw Error(ErrorCode::kUnsupported,
                    message +
                        ". Set override_mode to 'prefer' to fall back to automatic "
                        "selection.");
      }
      result.warnings.push_back(message +
                                "; falling back to automatic selection (override_mode 'prefer')");
      result.candidates.push_back(std::move(pair));
      select_automatically(layer, platform, result);
      return;
    }
    result.candidates.push_back(std::move(pair));
    result.backend = std::string(composite->name());
    result.chosen = std::move(composite);
    result.phases = PhasePair{picked[0], picked[1]};
  }
  result.binary_reason = notes[0] ? notes[0] : notes[1];
  result.runnable = !result.binary_reason.has_value();
}

}  // namespace attnkit
