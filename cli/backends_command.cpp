// attnkit backends [--platform P] [--json]
// Lists every registered backend with its capabilities and, for the platform, whether
// this binary can run it there (and why not).
#include <fmt/format.h>

#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "attnkit/core/json_schema.h"
#include "attnkit/registry/registry.h"
#include "attnkit/selector/priority.h"
#include "commands.h"
#include "common_options.h"

namespace attnkit::cli {
namespace {

struct BackendsOptions {
  std::string platform;
  bool json = false;
};

struct BackendRow {
  std::string name;
  BackendOrigin origin;
  std::shared_ptr<const AttentionBackend> backend;
  std::vector<std::string> reasons;  // why it cannot run on the platform; empty = it can
};

void print_text(const Platform& platform, const std::vector<BackendRow>& rows,
                bool custom_registered) {
  std::cout << fmt::format("Attention backends registered in attnkit, on platform {}{}:\n",
                           platform.to_string(), platform.is_local ? "" : " (described)");
  if (rows.empty()) std::cout << "\n  (none)\n";
  for (const BackendRow& row : rows) {
    std::cout << fmt::format("\n{} [{}]: {}\n", row.name, to_string(row.origin),
                             row.backend->description());
    if (row.reasons.empty()) {
      std::cout << fmt::format("  on {}: runnable by this binary\n", platform.to_string());
    } else {
      std::cout << fmt::format("  on {}: not runnable: {}\n", platform.to_string(),
                               fmt::join(row.reasons, "; "));
    }
    for (const auto& [field, value] : row.backend->capabilities().describe()) {
      std::cout << fmt::format("    {:<22} {}\n", field, value);
    }
  }
  if (!custom_registered) {
    std::cout << fmt::format("\n{} [reserved]: register a backend under this name to use it\n",
                             kCustomBackendName);
  }
}

void print_json(const Platform& platform, const std::vector<BackendRow>& rows,
                bool custom_registered) {
  nlohmann::json out;
  out["schema_version"] = kJsonSchemaVersion;
  out["platform"] = platform.to_string();
  out["platform_is_local"] = platform.is_local;
  nlohmann::json backends = nlohmann::json::array();
  for (const BackendRow& row : rows) {
    // "capabilities" holds typed values for programs, "capabilities_text" the sentences the
    // text output prints, field by field.
    nlohmann::json capabilities_text = nlohmann::json::object();
    for (const auto& [field, value] : row.backend->capabilities().describe()) {
      capabilities_text[field] = value;
    }
    backends.push_back({{"name", row.name},
                        {"origin", to_string(row.origin)},
                        {"description", row.backend->description()},
                        {"runnable", row.reasons.empty()},
                        {"reasons", row.reasons},
                        {"capabilities", to_json(row.backend->capabilities())},
                        {"capabilities_text", capabilities_text}});
  }
  out["backends"] = backends;
  out["reserved"] = nlohmann::json::array();
  if (!custom_registered) out["reserved"].push_back(kCustomBackendName);
  std::cout << out.dump(2) << "\n";
}

void run_backends(const BackendsOptions& options) {
  const Platform platform = resolve_platform(options.platform);
  const BackendRegistry& registry = global_registry();
  std::vector<BackendRow> rows;
  for (const std::string& name : registry.names()) {
    BackendRow row{name, registry.origin(name), registry.get(name), {}};
    row.reasons = platform_reasons(*row.backend, platform);
    rows.push_back(std::move(row));
  }
  const bool custom_registered = registry.contains(kCustomBackendName);
  if (options.json) {
    print_json(platform, rows, custom_registered);
  } else {
    print_text(platform, rows, custom_registered);
  }
}

}  // namespace

void add_backends_command(CLI::App& app) {
  auto options = std::make_shared<BackendsOptions>();
  CLI::App* command =
      app.add_subcommand("backends",
                         "List registered attention backends, their capabilities, and whether this "
                         "binary can run them on the platform");
  add_platform_option(*command, options->platform);
  add_json_flag(*command, options->json);
  command->callback([options] { run_backends(*options); });
}

}  // namespace attnkit::cli
