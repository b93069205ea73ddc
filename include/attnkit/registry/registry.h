#pragma once
// The registry (DESIGN.md, step 2 "Register"): backend names -> factories.
//
// Names are case-insensitive and stored upper case. Built-in backends come from one
// explicit list (src/registry/builtin_backends.cpp); register_backend() adds a backend or
// replaces a built-in at run time, and plugins register through the same call. The name
// CUSTOM is reserved: it is a valid name, but using it before something is registered
// under it is an error. Factories run lazily, on first use; each instance is then cached
// until its name is registered again.
//
// global_registry() is the process-wide registry (a function-local static, built on first
// use); tests construct their own independent BackendRegistry objects.

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attnkit/backend/backend.h"
#include "attnkit/export.h"

namespace attnkit {

using BackendFactory = std::function<std::unique_ptr<AttentionBackend>()>;

// One line of the built-in list.
struct ATTNKIT_API BuiltinBackend {
  std::string_view name;
  std::unique_ptr<AttentionBackend> (*factory)();
};

// The built-in backends, in the order `attnkit backends` lists them
// (src/registry/builtin_backends.cpp).
ATTNKIT_API std::span<const BuiltinBackend> builtin_backends();

// The reserved name a user registers their own backend under.
inline constexpr std::string_view kCustomBackendName = "CUSTOM";

// Where a registered name came from.
enum class BackendOrigin {
  kBuiltin,     // from builtin_backends()
  kRegistered,  // register_backend() added it, or replaced a built-in
  kPlugin,      // register_plugin_backend(): a backend of a plugin library (load_plugin)
};

// The name no backend may take: "auto" (any case) asks the selector to choose.
inline constexpr std::string_view kReservedAutoName = "AUTO";

class ATTNKIT_API BackendRegistry {
 public:
  // kBuiltins: starts with builtin_backends(); kEmpty: starts with nothing but the
  // reserved CUSTOM slot (for tests that want full control).
  enum class Contents { kBuiltins, kEmpty };
  explicit BackendRegistry(Contents contents = Contents::kBuiltins);
  BackendRegistry(const BackendRegistry&) = delete;
  BackendRegistry& operator=(const BackendRegistry&) = delete;

  // Adds `name` (case-insensitive; letters, digits and '_'), or replaces an existing
  // registration when `allow_override` is true. Throws Error(kInvalidArgument) for a bad
  // name, the reserved name AUTO, a null factory, or an existing name with allow_override
  // false.
  void register_backend(std::string_view name, BackendFactory factory, bool allow_override = true);
  // The same for a backend of the plugin library at `library_path`: its origin is kPlugin
  // and library() returns the path.
  void register_plugin_backend(std::string_view name, BackendFactory factory,
                               std::string library_path, bool allow_override);

  // The canonical (upper-case) registered name for `name`. Throws Error(kNotFound):
  // "Unknown attention backend: 'X'. Valid options are: A, B, C", or "Backend CUSTOM must be
  // registered before use".
  std::string canonical_name(std::string_view name) const;
  // True when `name` can be used now (registered; CUSTOM only once registered).
  bool contains(std::string_view name) const;
  // The backend registered as `name`, created by its factory on first use. Throws like
  // canonical_name(), and Error(kInternal) when a factory returns null.
  std::shared_ptr<const AttentionBackend> get(std::string_view name) const;

  // Registered names in order: built-ins first (in builtin_backends() order, also when
  // replaced), then run-time additions in registration order. CUSTOM only once registered.
  std::vector<std::string> names() const;
  // True when `name` is a built-in name (whether or not it was replaced since).
  bool is_builtin_name(std::string_view name) const;
  BackendOrigin origin(std::string_view name) const;
  // The plugin library a kPlugin backend came from; empty for every other origin.
  std::string library(std::string_view name) const;
  // Every name a user may write (names() plus CUSTOM), sorted, joined by ", ".
  std::string valid_options() const;
  // Changes whenever a registration changes; selection caches include it in their key.
  uint64_t generation() const;

 private:
  struct Entry {
    std::string name;  // upper case
    BackendFactory factory;
    BackendOrigin origin;
    bool builtin_name;
    std::string library;                                       // kPlugin: the library's path
    mutable std::shared_ptr<const AttentionBackend> instance;  // created on first get()
  };
  const Entry* find_locked(std::string_view upper) const;
  void add_entry(std::string_view name, BackendFactory factory, bool allow_override,
                 BackendOrigin origin, std::string library);
  std::string canonical_name_locked(std::string_view name) const;
  std::string valid_options_locked() const;

  mutable std::mutex mutex_;
  std::vector<Entry> entries_;
  uint64_t generation_ = 0;
};

// The process-wide registry, with the built-ins, created on first use.
ATTNKIT_API BackendRegistry& global_registry();

// Registers into global_registry() (what plugins and applications call).
ATTNKIT_API void register_backend(std::string_view name, BackendFactory factory,
                                  bool allow_override = true);

ATTNKIT_API std::string_view to_string(BackendOrigin origin);

}  // namespace attnkit
