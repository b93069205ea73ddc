#include "attnkit/plugin/plugin_loader.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <cstdlib>
#include <memory>
#include <utility>

#include "attnkit/core/error.h"
#include "attnkit/core/options.h"
#include "plugin/plugin_backend.h"
#include "plugin/plugin_library.h"

namespace attnkit {
namespace {

Error rejected(const std::string& path, const std::string& why) {
  return Error(ErrorCode::kPluginError, fmt::format("plugin library '{}' rejected: {}", path, why));
}

std::string upper(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// Asks a backend's optional probe whether it runs on this machine. Returns the score and,
// for 0, the plugin's reasons.
std::pair<uint32_t, std::string> probe(const AttnkitBackendDesc& desc, const std::string& name,
                                       const std::string& path) {
  if (desc.probe == nullptr) return {1, ""};
  std::vector<std::string> why;
  AttnkitReasonSink sink{};
  sink.struct_size = sizeof(sink);
  sink.abi_version = ATTNKIT_PLUGIN_ABI_VERSION;
  sink.context = &why;
  sink.add = [](void* context, const char* reason) {
    static_cast<std::vector<std::string>*>(context)->emplace_back(reason != nullptr ? reason : "");
  };
  uint32_t score = 0;
  plugin::throw_if_error(desc.probe(desc.user_data, &score, &sink),
                         fmt::format("plugin backend {} ({}): probe", name, path));
  return {score, fmt::format("{}", fmt::join(why, "; "))};
}

struct Candidate {
  std::string name;
  const AttnkitBackendDesc* desc;
  uint32_t score;
};

}  // namespace

PluginLoadReport load_plugin(const std::string& path, BackendRegistry& registry,
                             const PluginLoadOptions& options) {
  std::shared_ptr<plugin::PluginLibrary> library = plugin::PluginLibrary::open(path);
  const AttnkitPluginTable& table = library->table();

  PluginLoadReport report;
  report.path = path;
  report.plugin_name = table.plugin_name != nullptr ? table.plugin_name : "";
  report.plugin_version = table.plugin_version != nullptr ? table.plugin_version : "";
  report.abi_version = table.abi_version;

  // Validate everything and decide before registering anything, so a rejection leaves the
  // registry untouched.
  std::vector<Candidate> candidates;
  try {
    if (table.num_backends == 0) throw Error(ErrorCode::kPluginError, "it offers no backends");
    for (uint32_t i = 0; i < table.num_backends; ++i) {
      const AttnkitBackendDesc* desc = table.backends[i];
      if (desc == nullptr) {
        throw Error(ErrorCode::kPluginError, fmt::format("backends[{}] is NULL", i));
      }
      // Builds one adapter to validate the descriptor and its capabilities now, not on
      // first use.
      std::string name(plugin::make_plugin_backend(library, *desc)->name());
      for (const Candidate& c : candidates) {
        if (c.name == name) {
          throw Error(ErrorCode::kPluginError, fmt::format("it declares backend {} twice", name));
        }
      }
      auto [score, why] = probe(*desc, name, path);
      if (score == 0) {
        report.skipped.push_back(fmt::format("{}: score 0, cannot run on this machine{}", name,
                                             why.empty() ? "" : " (" + why + ")"));
        continue;
      }
      candidates.push_back({std::move(name), desc, score});
    }
  } catch (const Error& e) {
    throw rejected(path, e.what());
  }
  if (candidates.empty()) {
    throw rejected(path, fmt::format("no backend can run on this machine: {}",
                                     fmt::join(report.skipped, "; ")));
  }

  std::string custom_target = upper(options.register_as_custom);
  if (!custom_target.empty()) {
    bool found = false;
    for (const Candidate& c : candidates) found = found || c.name == custom_target;
    if (!found) {
      std::vector<std::string> names;
      names.reserve(candidates.size());
      for (const Candidate& c : candidates) names.push_back(c.name);
      throw rejected(path, fmt::format("register_as_custom names {}, which this plugin does not "
                                       "register (it registers: {})",
                                       options.register_as_custom, fmt::join(names, ", ")));
    }
  }
  std::vector<std::pair<std::string, const Candidate*>> registrations;
  for (const Candidate& c : candidates) {
    registrations.emplace_back(c.name, &c);
    if (c.name == custom_target) registrations.emplace_back(std::string(kCustomBackendName), &c);
  }
  if (!options.allow_override) {
    for (const auto& [name, c] : registrations) {
      if (registry.contains(name)) {
        throw rejected(path, fmt::format("backend name {} is already registered ({}); rename "
                                         "the plugin's backend, or load it with "
                                         "PluginLoadOptions::allow_override (C++ API) to "
                                         "replace it",
                                         name, to_string(registry.origin(name))));
      }
    }
  }
  for (const auto& [name, c] : registrations) {
    const AttnkitBackendDesc* desc = c->desc;
    // The factory keeps the library loaded for as long as the registry holds it.
    registry.register_plugin_backend(
        name, [library, desc] { return plugin::make_plugin_backend(library, *desc); }, path,
        options.allow_override);
  }
  for (const Candidate& c : candidates) {
    report.registered.push_back(c.name);
    report.scores.push_back(c.score);
  }
  return report;
}

std::vector<PluginLoadReport> load_plugins(std::string_view path_list, BackendRegistry& registry,
                                           const PluginLoadOptions& options) {
  std::vector<PluginLoadReport> reports;
  size_t start = 0;
  while (start <= path_list.size()) {
    size_t end = path_list.find(':', start);
    if (end == std::string_view::npos) end = path_list.size();
    const std::string_view entry = path_list.substr(start, end - start);
    if (!entry.empty()) reports.push_back(load_plugin(std::string(entry), registry, options));
    start = end + 1;
  }
  return reports;
}

std::vector<PluginLoadReport> load_plugins_from_environment(BackendRegistry& registry,
                                                            const PluginLoadOptions& options) {
  const std::optional<std::string> value = option_text(Option::kPluginPath);
  if (!value) return {};
  try {
    return load_plugins(*value, registry, options);
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{} (from {}={})", e.what(), kPluginPathEnv, *value));
  }
}

}  // namespace attnkit
