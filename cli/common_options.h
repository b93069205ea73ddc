#pragma once
// Options several commands share, each declared once here with its default and help text.
// A command keeps the values in a struct it owns (captured by its callback) and resolves
// them with the helpers below when it runs.

#include <CLI/CLI.hpp>
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

// --attention-config FILE_OR_JSON: an attention config file, or the JSON text itself when
// it starts with '{' (see attnkit/selector/attention_config.h).
CLI::Option* add_attention_config_option(CLI::App& command, std::string& text);
// Reads --attention-config (empty = defaults) and applies ATTNKIT_ATTENTION_BACKEND; see
// attnkit::load_attention_config() in attnkit/selector/attention_config.h.
inline AttentionConfig load_attention_config(const std::string& text,
                                             const BackendRegistry& registry = global_registry()) {
  return attnkit::load_attention_config(text, registry);
}

}  // namespace attnkit::cli
