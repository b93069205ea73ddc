#include "attnkit/explain/backends_report.h"

#include <fmt/format.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "attnkit/core/json_schema.h"
#include "attnkit/selector/priority.h"

namespace attnkit {
namespace {

struct BackendRow {
  std::string name;
  BackendOrigin origin;
  std::shared_ptr<const AttentionBackend> backend;
  std::vector<std::string> reasons;  // why it cannot run on the platform; empty = it can
};

std::vector<BackendRow> backend_rows(const Platform& platform, const BackendRegistry& registry) {
  std::vector<BackendRow> rows;
  for (const std::string& name : registry.names()) {
    BackendRow row{name, registry.origin(name), registry.get(name), {}};
    row.reasons = platform_reasons(*row.backend, platform);
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace

std::string backends_to_text(const Platform& platform, const BackendRegistry& registry) {
  std::string out = fmt::format("Attention backends registered in attnkit, on platform {}{}:\n",
                                platform.to_string(), platform.is_local ? "" : " (described)");
  const std::vector<BackendRow> rows = backend_rows(platform, registry);
  if (rows.empty()) out += "\n  (none)\n";
  for (const BackendRow& row : rows) {
    out +=
        fmt::format("\n{} [{}]: {}\n", row.name, to_string(row.origin), row.backend->description());
    if (row.reasons.empty()) {
      out += fmt::format("  on {}: runnable by this binary\n", platform.to_string());
    } else {
      out += fmt::format("  on {}: not runnable: {}\n", platform.to_string(),
                         fmt::join(row.reasons, "; "));
    }
    for (const auto& [field, value] : row.backend->capabilities().describe()) {
      out += fmt::format("    {:<22} {}\n", field, value);
    }
  }
  if (!registry.contains(kCustomBackendName)) {
    out += fmt::format("\n{} [reserved]: register a backend under this name to use it\n",
                       kCustomBackendName);
  }
  return out;
}

nlohmann::json backends_to_json(const Platform& platform, const BackendRegistry& registry) {
  nlohmann::json out;
  out["schema_version"] = kJsonSchemaVersion;
  out["platform"] = platform.to_string();
  out["platform_is_local"] = platform.is_local;
  nlohmann::json backends = nlohmann::json::array();
  for (const BackendRow& row : backend_rows(platform, registry)) {
    // "capabilities" holds typed values for programs, "capabilities_text" the sentences the
    // text output prints, field by field.
    nlohmann::json capabilities_text = nlohmann::json::object();
    for (const auto& [field, value] : row.backend->capabilities().describe()) {
      capabilities_text[field] = value;
    }
    nlohmann::json entry = {{"name", row.name},
                            {"origin", to_string(row.origin)},
                            {"description", row.backend->description()},
                            {"runnable", row.reasons.empty()},
                            {"reasons", row.reasons},
                            {"capabilities", to_json(row.backend->capabilities())},
                            {"capabilities_text", capabilities_text}};
    if (row.origin == BackendOrigin::kPlugin) entry["library"] = registry.library(row.name);
    backends.push_back(std::move(entry));
  }
  out["backends"] = backends;
  out["reserved"] = nlohmann::json::array();
  if (!registry.contains(kCustomBackendName)) out["reserved"].push_back(kCustomBackendName);
  return out;
}

}  // namespace attnkit
