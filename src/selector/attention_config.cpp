#include "attnkit/selector/attention_config.h"

#include <fmt/format.h>

#include <cctype>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "attnkit/core/error.h"
#include "attnkit/core/json_text.h"
#include "attnkit/core/options.h"

namespace attnkit {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

// "auto" or "tuned" (any case), or the registry's canonical name. An unknown name lists the
// two words with the registered names; CUSTOM before its registration is the registry's
// own error.
std::string canonical_choice(std::string_view name, const BackendRegistry& registry) {
  if (iequals(name, kAutoBackend)) return std::string(kAutoBackend);
  if (iequals(name, kTunedBackend)) return std::string(kTunedBackend);
  if (!registry.contains(name) && !iequals(name, kCustomBackendName)) {
    throw Error(ErrorCode::kNotFound,
                fmt::format("Unknown attention backend: '{}'. Valid options are: {}, {}, {}", name,
                            kAutoBackend, kTunedBackend, registry.valid_options()));
  }
  return registry.canonical_name(name);
}

const std::string& expect_string(const nlohmann::json& value, std::string_view where) {
  if (!value.is_string()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("Attention config: {} must be a string, got {} {}", where,
                            value.type_name(), json_excerpt(value)));
  }
  return value.get_ref<const std::string&>();
}

// {"prefill_backend": A, "decode_backend": B}, either key optional.
PhaseBackends parse_phase_object(const nlohmann::json& value, std::string_view where,
                                 const BackendRegistry& registry) {
  PhaseBackends phases;
  for (const auto& [key, name] : value.items()) {
    const std::string at = fmt::format("{}['{}']", where, key);
    if (key == "prefill_backend") {
      phases.prefill = canonical_choice(expect_string(name, at), registry);
    } else if (key == "decode_backend") {
      phases.decode = canonical_choice(expect_string(name, at), registry);
    } else {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("Unknown key '{}' in {}. Valid keys are: decode_backend, "
                              "prefill_backend",
                              key, where));
    }
  }
  if (phases.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} is an empty object: give prefill_backend, decode_backend or "
                            "both (or a backend name for both phases)",
                            where));
  }
  return phases;
}

}  // namespace

std::string_view to_string(OverrideMode mode) {
  switch (mode) {
    case OverrideMode::kStrict:
      return "strict";
    case OverrideMode::kPrefer:
      return "prefer";
  }
  return "?";
}

std::string_view to_string(BackendSource source) {
  switch (source) {
    case BackendSource::kDefault:
      return "default";
    case BackendSource::kConfig:
      return "config";
    case BackendSource::kEnv:
      return "env";
  }
  return "?";
}

OverrideMode parse_override_mode(std::string_view text) {
  if (iequals(text, "strict")) return OverrideMode::kStrict;
  if (iequals(text, "prefer")) return OverrideMode::kPrefer;
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("Unknown override_mode '{}'. Valid options are: prefer, strict", text));
}

AttentionConfig parse_attention_config(std::string_view json_text,
                                       const BackendRegistry& registry) {
  nlohmann::json root;
  try {
    root = parse_json_text(json_text);
  } catch (const JsonTextError& e) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("Attention config is not valid JSON: {}", e.what()));
  }
  if (!root.is_object()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("Attention config must be a JSON object, got {} {}", root.type_name(),
                            json_excerpt(root)));
  }

  AttentionConfig config;
  for (const auto& [key, value] : root.items()) {
    if (key == "backend") {
      config.backend = canonical_choice(expect_string(value, "'backend'"), registry);
      config.backend_source = BackendSource::kConfig;
    } else if (key == "backend_per_kind") {
      if (!value.is_object()) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("Attention config: 'backend_per_kind' must be an object mapping "
                                "KV cache group kinds to backend names, got {} {}",
                                value.type_name(), json_excerpt(value)));
      }
      for (const auto& [kind_text, name] : value.items()) {
        KvCacheKind kind;
        try {
          kind = parse<KvCacheKind>(kind_text);
        } catch (const Error&) {
          throw Error(ErrorCode::kNotFound,
                      fmt::format("Unknown KV cache group kind '{}' in backend_per_kind. Valid "
                                  "kinds are: {}",
                                  kind_text, valid_spellings<KvCacheKind>()));
        }
        const std::string where = fmt::format("backend_per_kind['{}']", kind_text);
        if (config.backend_per_kind.count(kind) > 0 ||
            config.phase_backends_per_kind.count(kind) > 0) {
          throw Error(ErrorCode::kInvalidArgument,
                      fmt::format("KV cache group kind '{}' appears twice in backend_per_kind",
                                  to_string(kind)));
        }
        if (name.is_object()) {
          config.phase_backends_per_kind.emplace(kind, parse_phase_object(name, where, registry));
        } else if (name.is_string()) {
          config.backend_per_kind.emplace(kind,
                                          canonical_choice(name.get<std::string>(), registry));
        } else {
          throw Error(ErrorCode::kInvalidArgument,
                      fmt::format("Attention config: {} must be a backend name or an object "
                                  "with prefill_backend and/or decode_backend, got {} {}",
                                  where, name.type_name(), json_excerpt(name)));
        }
      }
    } else if (key == "override_mode") {
      config.override_mode = parse_override_mode(expect_string(value, "'override_mode'"));
    } else if (key == "priority") {
      if (!value.is_array()) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("Attention config: 'priority' must be an array of rules "
                                "{{\"name\", \"when\", \"order\"}}, got {} {}",
                                value.type_name(), json_excerpt(value)));
      }
      const auto canonical = [&](std::string_view name) { return registry.canonical_name(name); };
      for (size_t i = 0; i < value.size(); ++i) {
        config.priority.push_back(
            parse_priority_rule(value[i], fmt::format("priority[{}]", i), canonical));
      }
    } else if (key == "prefill_backend") {
      config.phase_backends.prefill =
          canonical_choice(expect_string(value, "'prefill_backend'"), registry);
    } else if (key == "decode_backend") {
      config.phase_backends.decode =
          canonical_choice(expect_string(value, "'decode_backend'"), registry);
    } else {
      throw Error(
          ErrorCode::kInvalidArgument,
          fmt::format("Unknown key '{}' in attention config. Valid keys are: backend, "
                      "backend_per_kind, decode_backend, override_mode, prefill_backend, priority",
                      key));
    }
  }
  return config;
}

AttentionConfig apply_backend_env(AttentionConfig config, const char* env_value,
                                  const BackendRegistry& registry) {
  if (env_value == nullptr || *env_value == '\0') return config;
  if (config.backend_source == BackendSource::kConfig) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}={} and the attention config's 'backend' ({}) are mutually "
                            "exclusive; set only one of them",
                            kAttentionBackendEnvVar, env_value, config.backend));
  }
  try {
    config.backend = canonical_choice(env_value, registry);
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{} (set by {})", e.what(), kAttentionBackendEnvVar));
  }
  config.backend_source = BackendSource::kEnv;
  return config;
}

AttentionConfig apply_backend_env(AttentionConfig config, const BackendRegistry& registry) {
  const std::optional<std::string> value = option_text(Option::kAttentionBackend);
  return apply_backend_env(std::move(config), value ? value->c_str() : nullptr, registry);
}

AttentionConfig load_attention_config(std::string_view text_or_path,
                                      const BackendRegistry& registry) {
  AttentionConfig config;
  const size_t first = text_or_path.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && text_or_path[first] == '{') {
    config = parse_attention_config(text_or_path, registry);
  } else if (!text_or_path.empty()) {
    // A path, or @path as curl takes it.
    std::string_view path = text_or_path;
    if (path.starts_with('@')) {
      path.remove_prefix(1);
      if (path.empty()) {
        throw Error(ErrorCode::kInvalidArgument,
                    "Attention config '@' names no file: give @PATH, a path, or JSON text "
                    "starting with '{'");
      }
    }
    const std::string file(path);
    const std::string contents = read_document(file, "Attention config file");
    try {
      config = parse_attention_config(contents, registry);
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("{}: {}", file, e.what()));
    }
  }
  return apply_backend_env(std::move(config), registry);
}

nlohmann::json to_json(const AttentionConfig& config) {
  nlohmann::json out = nlohmann::json::object();
  out["backend"] = config.backend;
  nlohmann::json per_kind = nlohmann::json::object();
  for (const auto& [kind, name] : config.backend_per_kind) {
    per_kind[std::string(to_string(kind))] = name;
  }
  const auto phase_json = [](const PhaseBackends& phases) {
    nlohmann::json o = nlohmann::json::object();
    if (phases.prefill) o["prefill_backend"] = *phases.prefill;
    if (phases.decode) o["decode_backend"] = *phases.decode;
    return o;
  };
  for (const auto& [kind, phases] : config.phase_backends_per_kind) {
    per_kind[std::string(to_string(kind))] = phase_json(phases);
  }
  out["backend_per_kind"] = per_kind;
  out["override_mode"] = std::string(to_string(config.override_mode));
  if (config.phase_backends.prefill) out["prefill_backend"] = *config.phase_backends.prefill;
  if (config.phase_backends.decode) out["decode_backend"] = *config.phase_backends.decode;
  if (!config.priority.empty()) {
    nlohmann::json rules = nlohmann::json::array();
    for (const PriorityRule& rule : config.priority) rules.push_back(to_json(rule));
    out["priority"] = rules;
  }
  return out;
}

}  // namespace attnkit
