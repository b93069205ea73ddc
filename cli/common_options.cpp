#include "common_options.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "attnkit/core/error.h"

namespace attnkit::cli {

CLI::Option* add_platform_option(CLI::App& command, std::string& text) {
  return command.add_option("--platform", text,
                            "Platform to select for: cpu or cuda:MAJOR.MINOR (e.g. cuda:9.0); "
                            "default: this machine");
}

Platform resolve_platform(const std::string& text) {
  if (!text.empty()) return parse_platform(text);
  if (std::optional<Platform> gpu = local_cuda_platform()) return *gpu;
  return cpu_platform();
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

AttentionConfig load_attention_config(const std::string& text, const BackendRegistry& registry) {
  AttentionConfig config;
  if (!text.empty()) {
    const size_t first = text.find_first_not_of(" \t\r\n");
    if (first != std::string::npos && text[first] == '{') {
      config = parse_attention_config(text, registry);
    } else {
      std::ifstream file(text);
      if (!file) {
        throw Error(ErrorCode::kNotFound,
                    fmt::format("Cannot read attention config file '{}'", text));
      }
      std::stringstream contents;
      contents << file.rdbuf();
      try {
        config = parse_attention_config(contents.str(), registry);
      } catch (const Error& e) {
        throw Error(e.code(), fmt::format("{}: {}", text, e.what()));
      }
    }
  }
  return apply_backend_env(std::move(config), registry);
}

}  // namespace attnkit::cli
