#pragma once
// Options several commands share, each declared once here with its default and help text.
// A command keeps the values in a struct it owns (captured by its callback) and resolves
// them with the helpers below when it runs.

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>

#include "attnkit/core/platform.h"
#include "attnkit/registry/registry.h"
#include "attnkit/selector/attention_config.h"

namespace attnkit::cli {

// --platform P: "cpu" or "cuda:MAJOR.MINOR" (e.g. cuda:9.0), to ask what would happen on a
// machine one does not have. Empty (the default) = this machine.
CLI::Option* add_platform_option(CLI::App& command, std::string& text);
// The platform --platform names: attnkit::resolve_platform() (core/platform.h).

// --json: machine-readable output on stdout instead of text.
CLI::Option* add_json_flag(CLI::App& command, bool& json);
// Prints a --json document on stdout, indented. Bytes that are not UTF-8 (a path or a
// plugin's description) are replaced by U+FFFD instead of failing the dump after the
// whole run.
void print_json(const nlohmann::json& document);

// --attention-config FILE_OR_JSON: an attention config file (a path or @PATH), or the JSON
// text itself when it starts with '{' (see attnkit/selector/attention_config.h).
CLI::Option* add_attention_config_option(CLI::App& command, std::string& text);
// Reads --attention-config (empty = defaults) and applies ATTNKIT_ATTENTION_BACKEND; see
// attnkit::load_attention_config() in attnkit/selector/attention_config.h.
inline AttentionConfig load_attention_config(const std::string& text,
                                             const BackendRegistry& registry = global_registry()) {
  return attnkit::load_attention_config(text, registry);
}

// --prefill-attention-backend NAME / --decode-attention-backend NAME (SGLang's flags): the
// attention config's global "prefill_backend" / "decode_backend".
struct PhaseBackendFlags {
  std::string prefill;
  std::string decode;
};
void add_phase_backend_options(CLI::App& command, PhaseBackendFlags& flags);
// `config` with the flags applied (each name checked against `registry`). Throws Error when
// a flag names an unknown backend, or when the config sets the same phase too.
AttentionConfig apply_phase_backend_flags(AttentionConfig config, const PhaseBackendFlags& flags,
                                          const BackendRegistry& registry = global_registry());

// --tuning-cache FILE: the tuning cache "tuned" choices read (and tune/run write); empty =
// ATTNKIT_TUNING_CACHE, else the per-user default (selector/tuning.h).
CLI::Option* add_tuning_cache_option(CLI::App& command, std::string& path);

// Bounds of the numeric flags, checked by CLI11 (`->check(CLI::Range(...))`), so the
// message names the flag and the bound. They keep every size product in 64 bits and every
// count in an int; what a machine can hold is checked where the memory is sized.
inline constexpr int kMaxBlockSizeFlag = 65536;
inline constexpr int kMaxNumBlocksFlag = 1 << 24;
inline constexpr int kMaxRepeatsFlag = 100000;
// --threads: at most this many per hardware thread (OpenMP teams beyond that only
// oversubscribe, and libgomp fails to create a few thousand threads).
inline constexpr int kThreadsPerHardwareThread = 4;
int max_threads_flag();

// A seed: an integer 0 .. 2^64-1 written in full (no saturation of larger values).
CLI::Validator seed_text();
// A finite number > 0 (a tolerance: nan, inf, 0 and negatives are refused).
CLI::Validator positive_finite_number();

}  // namespace attnkit::cli
