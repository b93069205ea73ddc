#include "common_options.h"

#include <fmt/format.h>

#include "attnkit/core/error.h"

namespace attnkit::cli {

CLI::Option* add_platform_option(CLI::App& command, std::string& text) {
  return command.add_option("--platform", text,
                            "Platform to select for: cpu or cuda:MAJOR.MINOR (e.g. cuda:9.0); "
                            "default: this machine");
}

CLI::Option* add_json_flag(CLI::App& command, bool& json) {
  return command.add_flag("--json", json, "Print JSON instead of text");
}

CLI::Option* add_attention_config_option(CLI::App& command, std::string& text) {
  return command.add_option(
      "--attention-config", text,
      "Attention config: a JSON file, or JSON text starting with '{' (keys: backend, "
      "backend_per_kind, override_mode)");
}

}  // namespace attnkit::cli
