#include "common_options.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <limits>
#include <thread>

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

void print_json(const nlohmann::json& document) {
  std::cout << document.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

int max_threads_flag() {
  const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<int>(std::min(1024u, kThreadsPerHardwareThread * hardware));
}

CLI::Validator seed_text() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        uint64_t value = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
          return fmt::format("'{}' is not an integer from 0 to {}", text,
                             std::numeric_limits<uint64_t>::max());
        }
        return "";
      },
      "UINT64");
}

CLI::Validator positive_finite_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double value = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
        if (text.empty() || ec != std::errc() || end != text.data() + text.size() ||
            !std::isfinite(value) || value <= 0) {
          return fmt::format("'{}' must be a finite number above 0", text);
        }
        return "";
      },
      "POSITIVE");
}

}  // namespace attnkit::cli
