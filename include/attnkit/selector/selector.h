#pragma once
// The selector (DESIGN.md, step 3 "Select"): matches one layer (a SelectorConfig) on a
// platform to a backend, honouring the user's AttentionConfig, and says why.
//
// For a layer of kind K the user's choice is backend_per_kind[K], else the global backend
// (from the config or ATTNKIT_ATTENTION_BACKEND), else automatic selection. Automatic
// selection walks priority_list() and takes the first valid backend; every candidate is
// validated and its reasons kept for the report. A user choice that cannot serve the layer
// is an error (strict) or falls back to automatic selection with a warning (prefer).
//
// "Valid" on a local platform includes that this binary carries the backend's kernels for
// it. On a platform that is only described (Platform::is_local false, e.g. cuda:9.0 asked
// on a CPU machine) selection matches capabilities only and reports the binary's reason as
// a note, so one can explain what a GPU machine with a full build would choose.
//
// Prefill and decode rows may have different choices (AttentionConfig's prefill_backend /
// decode_backend): each named phase backend must serve the layer alone, a phase left
// automatic takes the first valid backend of the walk that pairs with the other, and the
// two must pair over one KV cache (pairing_reasons(), backend/composite_backend.h); the
// result is then a composite backend and SelectionResult::phases names each. strict/prefer
// apply per phase and to the pairing as above.
//
// Results are cached per distinct (choice, layer config, platform, registry state): the
// same layer asked twice returns the same result object.

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "attnkit/backend/selector_config.h"
#include "attnkit/core/platform.h"
#include "attnkit/export.h"
#include "attnkit/registry/registry.h"
#include "attnkit/selector/attention_config.h"
#include "attnkit/selector/priority_rule.h"
#include "attnkit/selector/tuning.h"

namespace attnkit {

// Why the chosen backend was chosen.
enum class ChosenBy {
  kAuto,     // automatic selection (no user choice, or a prefer-mode fallback)
  kGlobal,   // the attention config's global "backend"
  kPerKind,  // the attention config's backend_per_kind for this layer's kind
  kEnv,      // ATTNKIT_ATTENTION_BACKEND
  kTuned,    // "tuned": the fastest valid backend by measurement (SelectionResult::tuning)
};

struct ATTNKIT_API CandidateReport {
  std::string backend;
  // Why it cannot serve the layer; empty = valid.
  std::vector<std::string> reasons;
  // Described platforms only: why this binary could not run it there (not a rejection).
  std::optional<std::string> binary_note;
  // True for the user's own choice (listed first), false for the automatic walk.
  bool user_choice = false;
  // When prefill and decode rows go to different backends: the phase this candidate was
  // tried for (nullopt: both phases, or the pairing of the two, named by composite_name()).
  std::optional<Phase> phase;

  bool valid() const { return reasons.empty(); }
  bool operator==(const CandidateReport&) const = default;
};

// The backend of each phase, when they differ.
struct ATTNKIT_API PhasePair {
  std::string prefill;
  std::string decode;
  bool operator==(const PhasePair&) const = default;
};

// The user's choice for the layers of one kind, per phase ("auto" where none).
struct ATTNKIT_API PhaseChoice {
  std::string prefill{kAutoBackend};
  std::string decode{kAutoBackend};
  ChosenBy chosen_by = ChosenBy::kAuto;
  // "tuned" given by a phase key: each phase is tuned on its own buckets.
  bool tuned_per_phase = false;
  bool split() const { return prefill != decode; }
};

struct ATTNKIT_API SelectionResult {
  // The chosen backend (canonical name); for a per-phase composite composite_name() of
  // the two (backend/composite_backend.h), and `phases` names each.
  std::string backend;
  std::optional<PhasePair> phases;
  // The chosen backend itself, as the registry held it at selection: what the runtime and
  // explain build from (never looked up again by name).
  std::shared_ptr<const AttentionBackend> chosen;
  ChosenBy chosen_by = ChosenBy::kAuto;
  // The user's choice for this layer ("auto" when none) and how it was to be honoured.
  std::string requested{kAutoBackend};
  OverrideMode override_mode = OverrideMode::kStrict;
  KvCacheKind kind = KvCacheKind::kFullAttention;
  SelectorConfig config;
  std::string platform;  // Platform::to_string()
  bool platform_is_local = false;
  // The priority rule that ordered the automatic walk (when it ran; for a per-phase
  // composite, the walk of the last phase left to it).
  std::optional<PriorityDecision> priority;
  // "tuned": every valid candidate's measured times and why the winner won (or why the
  // automatic choice stands).
  std::optional<TuningReport> tuning;
  // A phase key's "tuned": that phase's times (on its own buckets) and why its winner won.
  std::vector<TuningReport> phase_tuning;
  // The user's choice first (when there is one), then the automatic walk in priority order
  // (only when it ran: no user choice, or a prefer-mode fallback).
  std::vector<CandidateReport> candidates;
  std::vector<std::string> warnings;
  // Whether this binary can run the chosen backend on the platform (always true on a local
  // platform); binary_reason says why not.
  bool runnable = true;
  std::optional<std::string> binary_reason;
};

class ATTNKIT_API Selector {
 public:
  // `config` should already carry ATTNKIT_ATTENTION_BACKEND (apply_backend_env). The
  // registry must outlive the selector.
  // `tuning` serves "tuned" choices; nullptr = read the default tuning cache only (nothing
  // is measured).
  explicit Selector(AttentionConfig config = {},
                    const BackendRegistry& registry = global_registry(),
                    std::shared_ptr<const Tuning> tuning = nullptr);

  // Selects the backend of one layer. Throws Error(kUnsupported) when the user's choice
  // cannot serve it in strict mode (listing its reasons), or when no candidate can
  // (listing every candidate with its reasons).
  std::shared_ptr<const SelectionResult> select(const SelectorConfig& layer,
                                                const Platform& platform) const;

  // The user's choice for layers of `kind` and where it comes from; {"auto", kAuto} when
  // the user made none. Phase choices aside (phase_choice_for()).
  std::pair<std::string, ChosenBy> choice_for(KvCacheKind kind) const;
  // The user's choice per phase for layers of `kind` (AttentionConfig's order: the kind's
  // phase object, the kind's name, the global prefill/decode_backend, the global backend).
  PhaseChoice phase_choice_for(KvCacheKind kind) const;

  const AttentionConfig& attention_config() const { return config_; }
  const BackendRegistry& registry() const { return *registry_; }
  const std::shared_ptr<const Tuning>& tuning() const { return tuning_; }
  // Distinct results computed so far (for tests of the cache).
  size_t cache_size() const;

 private:
  struct CacheKey {
    std::string choice;
    ChosenBy chosen_by;
    SelectorConfig layer;
    std::string platform;
    bool platform_is_local;
    uint64_t registry_generation;
    bool operator==(const CacheKey&) const = default;
  };
  SelectionResult compute(const SelectorConfig& layer, const Platform& platform) const;
  // Walks priority_list() and chooses the first valid candidate (Error when none is).
  void select_automatically(const SelectorConfig& layer, const Platform& platform,
                            SelectionResult& result) const;
  void choose(const CandidateReport& chosen, SelectionResult& result) const;
  // "tuned": the automatic walk, then the fastest of its valid candidates.
  void select_tuned(const SelectorConfig& layer, const Platform& platform,
                    SelectionResult& result) const;
  // Where the choice of `phase` for layers of `kind` comes from, for messages.
  std::string phase_source(KvCacheKind kind, Phase phase) const;
  // The fastest of `valid` on the tuning buckets (of `phase` only, when given); winner unset
  // (and `why` naming `fallback`) when not every candidate has a time.
  TuningReport tune(const std::vector<std::shared_ptr<const AttentionBackend>>& valid,
                    const SelectorConfig& layer, const Platform& platform,
                    std::optional<Phase> phase, const std::string& fallback) const;
  // A layer whose phases have different choices.
  void compute_split(const PhaseChoice& choice, const SelectorConfig& layer,
                     const Platform& platform, SelectionResult& result) const;

  // Behind a pointer so that a Selector can be moved (e.g. into an engine's members).
  struct Cache {
    std::mutex mutex;
    std::vector<std::pair<CacheKey, std::shared_ptr<const SelectionResult>>> entries;
  };

  AttentionConfig config_;
  const BackendRegistry* registry_;
  std::shared_ptr<const Tuning> tuning_;
  std::unique_ptr<Cache> cache_;
};

ATTNKIT_API std::string_view to_string(ChosenBy chosen_by);

}  // namespace attnkit
