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
      "backend_per_kind, override_mode, prefill_backend, decode_backend)");
}

CLI::Option* add_tuning_cache_option(CLI::App& command, std::string& path) {
  return command.add_option(
      "--tuning-cache", path,
      "Tuning cache file for \"tuned\" choices; default: ATTNKIT_TUNING_CACHE, else "
      "$XDG_CACHE_HOME/attnkit/tuning.json or ~/.cache/attnkit/tuning.json");
}

void add_phase_backend_options(CLI::App& command, PhaseBackendFlags& flags) {
  command.add_option("--prefill-attention-backend", flags.prefill,
                     "Backend for the prefill rows of every layer (the attention config's "
                     "\"prefill_backend\"), or auto");
  command.add_option("--decode-attention-backend", flags.decode,
                     "Backend for the decode rows (query length 1) of every layer (the attention "
                     "config's \"decode_backend\"), or auto");
}

AttentionConfig apply_phase_backend_flags(AttentionConfig config, const PhaseBackendFlags& flags,
                                          const BackendRegistry& registry) {
  const auto apply = [&](const std::string& value, std::optional<std::string>& phase,
                         std::string_view flag, std::string_view key) {
    if (value.empty()) return;
    if (phase) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{} {} and the attention config's \"{}\" ({}) are mutually "
                              "exclusive; give only one of them",
                              flag, value, key, *phase));
    }
    // Parsed as the config key would be, so that names and errors are the same.
    const AttentionConfig parsed =
        parse_attention_config(nlohmann::json{{std::string(key), value}}.dump(), registry);
    phase = key == "prefill_backend" ? parsed.phase_backends.prefill : parsed.phase_backends.decode;
  };
  apply(flags.prefill, config.phase_backends.prefill, "--prefill-attention-backend",
        "prefill_backend");
  apply(flags.decode, config.phase_backends.decode, "--decode-attention-backend", "decode_backend");
  return config;
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
