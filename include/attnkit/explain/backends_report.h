#pragma once
// `attnkit backends` as a library: every registered backend with its capabilities and, for
// a platform, whether this binary can run it there (and why not). The CLI prints these;
// the Python package returns the JSON as Python objects.
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "attnkit/core/platform.h"
#include "attnkit/export.h"
#include "attnkit/registry/registry.h"

namespace attnkit {

// For people: one paragraph per backend, its origin, runnability on `platform` and its
// capabilities field by field; the reserved CUSTOM name when nothing is registered under it.
ATTNKIT_API std::string backends_to_text(const Platform& platform,
                                         const BackendRegistry& registry = global_registry());
// For programs; the schema is docs/schemas/backends.schema.json:
// {"schema_version", "platform", "platform_is_local", "backends": [{"name", "origin",
//  "description", "runnable", "reasons", "capabilities" (typed), "capabilities_text"}],
//  "reserved": [names]}
ATTNKIT_API nlohmann::json backends_to_json(const Platform& platform,
                                            const BackendRegistry& registry = global_registry());

}  // namespace attnkit
