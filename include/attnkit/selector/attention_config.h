#pragma once
// AttentionConfig: the user's say in backend selection (DESIGN.md, step 3 "Select").
//
// JSON form (every key optional; unknown keys are errors):
//   {
//     "backend": "CPU_FLASH",                       // a name, "auto" (default) or "tuned"
//     "backend_per_kind": {"sliding_window": "REFERENCE", "full_attention": "auto"},
//     "override_mode": "strict",                     // or "prefer"
//     "prefill_backend": "CPU_FLASH",                // per phase (docs/selection.md)
//     "decode_backend": "REFERENCE",
//     "priority": [{"name": "gqa", "when": {"gqa_ratio": {"min": 4}},  // priority_rule.h
//                   "order": ["REFERENCE", "CPU_FLASH"]}]
//   }
// A layer whose kind is in backend_per_kind uses that choice; other layers use the global
// `backend`, or automatic selection. Prefill and decode rows of a step may go to different
// backends over one KV cache (backend/composite_backend.h): "prefill_backend" and
// "decode_backend" set the phase globally, and a backend_per_kind value may be an object
// {"prefill_backend": A, "decode_backend": B} (either key may be left out). A phase takes,
// in order: the kind's object, the kind's plain name (both phases), the global
// prefill_backend / decode_backend, the global `backend`, automatic selection. strict: a chosen
// backend that cannot serve a layer is an error listing its reasons; prefer: fall back to automatic
// selection with a warning. The environment variable ATTNKIT_ATTENTION_BACKEND sets the global
// backend; setting it together with a config `backend` is an error (they are mutually exclusive).

#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attnkit/core/enums.h"
#include "attnkit/export.h"
#include "attnkit/registry/registry.h"
#include "attnkit/selector/priority_rule.h"

namespace attnkit {

inline constexpr std::string_view kAutoBackend = "auto";
// Measured choice: the fastest valid backend on this device (selector/tuning.h).
inline constexpr std::string_view kTunedBackend = "tuned";
inline constexpr const char* kAttentionBackendEnvVar = "ATTNKIT_ATTENTION_BACKEND";

enum class OverrideMode { kStrict, kPrefer };

// Where the global `backend` came from.
enum class BackendSource {
  kDefault,  // nobody set it: automatic selection
  kConfig,   // the attention config's "backend" key
  kEnv,      // ATTNKIT_ATTENTION_BACKEND
};

// A backend per phase; nullopt = the phase follows the next, less specific choice.
struct ATTNKIT_API PhaseBackends {
  std::optional<std::string> prefill;  // canonical name or "auto"
  std::optional<std::string> decode;
  bool empty() const { return !prefill && !decode; }
  bool operator==(const PhaseBackends&) const = default;
};

struct ATTNKIT_API AttentionConfig {
  // Canonical (upper-case) backend name, or "auto".
  std::string backend{kAutoBackend};
  BackendSource backend_source = BackendSource::kDefault;
  // Kind -> canonical backend name or "auto" (automatic for that kind, whatever `backend`).
  std::map<KvCacheKind, std::string> backend_per_kind;
  OverrideMode override_mode = OverrideMode::kStrict;
  // "prefill_backend" / "decode_backend".
  PhaseBackends phase_backends;
  // Kinds whose backend_per_kind value is an object (a kind is in at most one of the two
  // maps).
  std::map<KvCacheKind, PhaseBackends> phase_backends_per_kind;
  // "priority": rules tried before the built-in ones by automatic selection.
  std::vector<PriorityRule> priority;

  bool operator==(const AttentionConfig&) const = default;
};

// Parses the JSON text above, checking every name against `registry`. Throws Error naming
// the bad value and listing the valid ones (invalid JSON, non-object, unknown key, wrong
// value type, unknown backend, unregistered CUSTOM, unknown kind, duplicate kind, unknown
// override_mode).
ATTNKIT_API AttentionConfig parse_attention_config(
    std::string_view json_text, const BackendRegistry& registry = global_registry());

// Applies ATTNKIT_ATTENTION_BACKEND: `env_value` is its value (nullptr or empty = unset).
// Throws Error when it names an unknown backend, or when `config.backend` was set by the
// config too.
ATTNKIT_API AttentionConfig apply_backend_env(AttentionConfig config, const char* env_value,
                                              const BackendRegistry& registry = global_registry());
// The same, reading the process environment.
ATTNKIT_API AttentionConfig apply_backend_env(AttentionConfig config,
                                              const BackendRegistry& registry = global_registry());

// What a command line's --attention-config gives: JSON text when it starts with '{', else
// the path of a JSON file, or @path (empty = defaults); then ATTNKIT_ATTENTION_BACKEND is
// applied. Throws Error for a file that is missing, a directory, not a regular file or
// unreadable (naming it, read_document() in core/json_text.h), and every parse error
// (prefixed with the file's path).
ATTNKIT_API AttentionConfig load_attention_config(
    std::string_view text_or_path, const BackendRegistry& registry = global_registry());

// The JSON form (what parse_attention_config reads back).
ATTNKIT_API nlohmann::json to_json(const AttentionConfig& config);

ATTNKIT_API std::string_view to_string(OverrideMode mode);
ATTNKIT_API std::string_view to_string(BackendSource source);
// "strict" or "prefer", case-insensitive; otherwise Error listing both.
ATTNKIT_API OverrideMode parse_override_mode(std::string_view text);

}  // namespace attnkit
