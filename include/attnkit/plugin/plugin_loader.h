#pragma once
// Loading third-party backends from shared libraries (the plain-C ABI of
// attnkit/plugin_abi.h; guide: docs/plugins.md).
//
// A loaded plugin's backends are registered into a BackendRegistry like any run-time
// registration, behind an adapter that implements AttentionBackend, so selection, explain,
// conformance and the runtime treat them exactly like built-ins. Three ways in:
//   - load_plugin(path) from C++;
//   - the ATTNKIT_PLUGIN_PATH environment variable (':'-separated library files), read by
//     load_plugins_from_environment() (the attnkit CLI calls it at start-up);
//   - `attnkit --plugin PATH` (repeatable).
// A library stays loaded as long as anything made from it (registry entry, backend,
// builder, plan, implementation) lives.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "attnkit/export.h"
#include "attnkit/registry/registry.h"

namespace attnkit {

// The environment variable listing plugin libraries to load, separated by ':'.
inline constexpr std::string_view kPluginPathEnv = "ATTNKIT_PLUGIN_PATH";

struct ATTNKIT_API PluginLoadOptions {
  // Replace backends already registered under the same name (built-ins included). When
  // false, a name clash rejects the whole library and nothing of it is registered.
  bool allow_override = false;
  // Also register the plugin backend of this name under the reserved name CUSTOM
  // (case-insensitive; empty = no). A backend that itself is named CUSTOM fills the slot
  // without this.
  std::string register_as_custom;
};

// What one successful load did.
struct ATTNKIT_API PluginLoadReport {
  std::string path;
  std::string plugin_name;     // as the plugin's table declares it
  std::string plugin_version;  // as the plugin's table declares it
  uint32_t abi_version = 0;    // the plugin ABI version the plugin was built against
  // Names registered (upper case), in the plugin's order, with their probe scores.
  std::vector<std::string> registered;
  std::vector<uint32_t> scores;
  // Backends the plugin offers that were not registered, one line each with the reason,
  // e.g. "FOO: score 0, cannot run on this machine (needs AVX-512)".
  std::vector<std::string> skipped;
};

// Loads the library at `path` and registers its backends into `registry`. Throws
// Error(kPluginError) that names the library and says exactly why it was rejected: not
// found, cannot be loaded, missing symbol attnkit_plugin_init, init returned an error,
// plugin ABI version too new or too old, malformed table or backend, every backend scored
// 0 (cannot run on this machine), or a name already registered (without allow_override).
// On any rejection nothing of the library is registered and it is unloaded.
ATTNKIT_API PluginLoadReport load_plugin(const std::string& path,
                                         BackendRegistry& registry = global_registry(),
                                         const PluginLoadOptions& options = {});

// Loads each library of a ':'-separated list in order (empty entries are ignored). Stops at
// the first rejection, throwing its Error; libraries loaded before it stay loaded.
ATTNKIT_API std::vector<PluginLoadReport> load_plugins(
    std::string_view path_list, BackendRegistry& registry = global_registry(),
    const PluginLoadOptions& options = {});

// load_plugins() over $ATTNKIT_PLUGIN_PATH (nothing when unset or empty). Errors say that
// the path came from ATTNKIT_PLUGIN_PATH.
ATTNKIT_API std::vector<PluginLoadReport> load_plugins_from_environment(
    BackendRegistry& registry = global_registry(), const PluginLoadOptions& options = {});

}  // namespace attnkit
