#include "attnkit/registry/registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

#include "attnkit/core/error.h"

namespace attnkit {
namespace {

std::string to_upper(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

bool is_valid_name(std::string_view name) {
  if (name.empty()) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
  });
}

}  // namespace

std::string_view to_string(BackendOrigin origin) {
  switch (origin) {
    case BackendOrigin::kBuiltin:
      return "built-in";
    case BackendOrigin::kRegistered:
      return "registered";
    case BackendOrigin::kPlugin:
      return "plugin";
  }
  return "?";
}

BackendRegistry::BackendRegistry(Contents contents) {
  if (contents == Contents::kEmpty) return;
  for (const BuiltinBackend& builtin : builtin_backends()) {
    ATTNKIT_CHECK(is_valid_name(builtin.name) && to_upper(builtin.name) == builtin.name,
                  "built-in backend names are upper case letters, digits and '_'");
    ATTNKIT_CHECK(find_locked(builtin.name) == nullptr, "built-in backend listed twice");
    ATTNKIT_CHECK(builtin.name != kCustomBackendName, "CUSTOM is reserved for users");
    entries_.push_back(Entry{std::string(builtin.name), builtin.factory, BackendOrigin::kBuiltin,
                             /*builtin_name=*/true, "", nullptr});
  }
}

const BackendRegistry::Entry* BackendRegistry::find_locked(std::string_view upper) const {
  for (const Entry& entry : entries_) {
    if (entry.name == upper) return &entry;
  }
  return nullptr;
}

void BackendRegistry::register_backend(std::string_view name, BackendFactory factory,
                                       bool allow_override) {
  add_entry(name, std::move(factory), allow_override, BackendOrigin::kRegistered, "");
}

void BackendRegistry::register_plugin_backend(std::string_view name, BackendFactory factory,
                                              std::string library_path, bool allow_override) {
  add_entry(name, std::move(factory), allow_override, BackendOrigin::kPlugin,
            std::move(library_path));
}

void BackendRegistry::add_entry(std::string_view name, BackendFactory factory, bool allow_override,
                                BackendOrigin origin, std::string library) {
  if (!is_valid_name(name)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("Invalid backend name '{}': use letters, digits and '_'", name));
  }
  const std::string upper = to_upper(name);
  if (upper == kReservedAutoName) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("Backend name '{}' is reserved: 'auto' asks the selector to choose, "
                            "so a backend registered under it could never be chosen; pick "
                            "another name",
                            name));
  }
  if (!factory) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("register_backend('{}'): the factory is empty", name));
  }
  std::lock_guard lock(mutex_);
  for (Entry& entry : entries_) {
    if (entry.name != upper) continue;
    if (!allow_override) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("Backend {} is already registered ({}); pass allow_override = "
                              "true to replace it",
                              upper, to_string(entry.origin)));
    }
    entry.factory = std::move(factory);
    entry.origin = origin;
    entry.library = std::move(library);
    entry.instance.reset();
    ++generation_;
    return;
  }
  entries_.push_back(Entry{upper, std::move(factory), origin, /*builtin_name=*/false,
                           std::move(library), nullptr});
  ++generation_;
}

std::string BackendRegistry::valid_options_locked() const {
  std::vector<std::string> names;
  names.reserve(entries_.size() + 1);
  for (const Entry& entry : entries_) names.push_back(entry.name);
  if (find_locked(kCustomBackendName) == nullptr) names.emplace_back(kCustomBackendName);
  std::sort(names.begin(), names.end());
  return fmt::format("{}", fmt::join(names, ", "));
}

std::string BackendRegistry::valid_options() const {
  std::lock_guard lock(mutex_);
  return valid_options_locked();
}

std::string BackendRegistry::canonical_name_locked(std::string_view name) const {
  std::string upper = to_upper(name);  // not const: returned by move
  if (find_locked(upper) != nullptr) return upper;
  if (upper == kCustomBackendName) {
    throw Error(ErrorCode::kNotFound, "Backend CUSTOM must be registered before use");
  }
  throw Error(ErrorCode::kNotFound, fmt::format("Unknown attention backend: '{}'. Valid options "
                                                "are: {}",
                                                name, valid_options_locked()));
}

std::string BackendRegistry::canonical_name(std::string_view name) const {
  std::lock_guard lock(mutex_);
  return canonical_name_locked(name);
}

bool BackendRegistry::contains(std::string_view name) const {
  std::lock_guard lock(mutex_);
  return find_locked(to_upper(name)) != nullptr;
}

std::shared_ptr<const AttentionBackend> BackendRegistry::get(std::string_view name) const {
  std::lock_guard lock(mutex_);
  const Entry* entry = find_locked(canonical_name_locked(name));
  if (!entry->instance) {
    std::unique_ptr<AttentionBackend> backend = entry->factory();
    if (!backend) {
      throw Error(ErrorCode::kInternal,
                  fmt::format("The factory of backend {} returned no backend", entry->name));
    }
    entry->instance = std::move(backend);
  }
  return entry->instance;
}

std::vector<std::string> BackendRegistry::names() const {
  std::lock_guard lock(mutex_);
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const Entry& entry : entries_) out.push_back(entry.name);
  return out;
}

bool BackendRegistry::is_builtin_name(std::string_view name) const {
  std::lock_guard lock(mutex_);
  const Entry* entry = find_locked(to_upper(name));
  return entry != nullptr && entry->builtin_name;
}

BackendOrigin BackendRegistry::origin(std::string_view name) const {
  std::lock_guard lock(mutex_);
  return find_locked(canonical_name_locked(name))->origin;
}

std::string BackendRegistry::library(std::string_view name) const {
  std::lock_guard lock(mutex_);
  return find_locked(canonical_name_locked(name))->library;
}

uint64_t BackendRegistry::generation() const {
  std::lock_guard lock(mutex_);
  return generation_;
}

BackendRegistry& global_registry() {
  static BackendRegistry registry(BackendRegistry::Contents::kBuiltins);
  return registry;
}

void register_backend(std::string_view name, BackendFactory factory, bool allow_override) {
  global_registry().register_backend(name, std::move(factory), allow_override);
}

}  // namespace attnkit
