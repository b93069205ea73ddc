#include "plugin/plugin_library.h"

#include <dlfcn.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <system_error>

#include "attnkit/build_config.h"
#include "attnkit/core/error.h"
#include "plugin/abi_convert.h"

namespace attnkit::plugin {
namespace {

Error rejected(const std::string& path, const std::string& why) {
  return Error(ErrorCode::kPluginError, fmt::format("plugin library '{}' rejected: {}", path, why));
}

void host_log(void* context, int32_t level, const char* message) {
  const auto* lib = static_cast<const PluginLibrary*>(context);
  const spdlog::level::level_enum spd = level <= ATTNKIT_LOG_DEBUG     ? spdlog::level::debug
                                        : level == ATTNKIT_LOG_INFO    ? spdlog::level::info
                                        : level == ATTNKIT_LOG_WARNING ? spdlog::level::warn
                                                                       : spdlog::level::err;
  spdlog::log(spd, "plugin {}: {}", lib->path(), message != nullptr ? message : "(null)");
}

}  // namespace

std::shared_ptr<PluginLibrary> PluginLibrary::open(const std::string& path) {
  namespace fs = std::filesystem;
  if (path.empty())
    throw rejected(path, "the path is empty; name the plugin's shared library file");
  // A path with a '/' names a file; a bare name is left to the dynamic linker's search.
  if (path.find('/') != std::string::npos) {
    std::error_code ec;
    const fs::file_status st = fs::status(path, ec);
    if (!fs::exists(st)) throw rejected(path, "not found (no such file)");
    if (fs::is_directory(st)) {
      throw rejected(path, "is a directory; name the plugin's shared library file");
    }
  }

  std::shared_ptr<PluginLibrary> lib(new PluginLibrary());
  lib->path_ = path;
  dlerror();
  lib->handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib->handle_ == nullptr) {
    const char* err = dlerror();
    const bool bare = path.find('/') == std::string::npos;
    throw rejected(path,
                   fmt::format("{}: {}", bare ? "not found or not loadable" : "cannot be loaded",
                               err != nullptr ? err : "unknown dlopen error"));
  }

  dlerror();
  void* symbol = dlsym(lib->handle_, ATTNKIT_PLUGIN_INIT_SYMBOL);
  if (symbol == nullptr) {
    throw rejected(path, fmt::format("missing symbol {} (not an attnkit plugin, or the symbol is "
                                     "not exported with C linkage)",
                                     ATTNKIT_PLUGIN_INIT_SYMBOL));
  }
  // dlsym returns the function as void*; POSIX guarantees the round trip.
  auto init = reinterpret_cast<AttnkitPluginInitFn>(symbol);

  lib->host_.struct_size = sizeof(AttnkitHostApi);
  lib->host_.abi_version = ATTNKIT_PLUGIN_ABI_VERSION;
  lib->host_.host_version = ATTNKIT_VERSION_STRING;
  lib->host_.context = lib.get();
  lib->host_.log = &host_log;

  const AttnkitPluginTable* table = nullptr;
  if (auto failure = take_status(init(ATTNKIT_PLUGIN_ABI_VERSION, &lib->host_, &table))) {
    throw rejected(path, fmt::format("{} failed: {}", ATTNKIT_PLUGIN_INIT_SYMBOL, *failure));
  }
  if (table == nullptr) {
    throw rejected(path, fmt::format("{} returned no table", ATTNKIT_PLUGIN_INIT_SYMBOL));
  }
  if (table->abi_version > ATTNKIT_PLUGIN_ABI_VERSION) {
    throw rejected(path, fmt::format("plugin ABI version {} is too new: this attnkit supports "
                                     "versions {} to {}; use a newer attnkit",
                                     table->abi_version, ATTNKIT_PLUGIN_ABI_MIN_VERSION,
                                     ATTNKIT_PLUGIN_ABI_VERSION));
  }
  if (table->abi_version < ATTNKIT_PLUGIN_ABI_MIN_VERSION) {
    throw rejected(path, fmt::format("plugin ABI version {} is too old: this attnkit supports "
                                     "versions {} to {}; rebuild the plugin against a current "
                                     "plugin_abi.h",
                                     table->abi_version, ATTNKIT_PLUGIN_ABI_MIN_VERSION,
                                     ATTNKIT_PLUGIN_ABI_VERSION));
  }
  try {
    check_struct_header("plugin table", table->struct_size, table->abi_version, kPluginTableV1Size);
  } catch (const Error& e) {
    throw rejected(path, e.what());
  }
  if (table->num_backends > 0 && table->backends == nullptr) {
    throw rejected(path, fmt::format("plugin table lists {} backends but backends is NULL",
                                     table->num_backends));
  }
  lib->table_ = table;
  return lib;
}

PluginLibrary::~PluginLibrary() {
  if (table_ != nullptr && table_->shutdown != nullptr) table_->shutdown();
  if (handle_ != nullptr) dlclose(handle_);
}

std::optional<std::string> take_status(AttnkitStatus* status) {
  if (status == nullptr) return std::nullopt;
  // Only the version-1 fields are read; a status too small to hold them is itself an error,
  // and cannot be released safely, so it is leaked.
  if (status->struct_size < kStatusV1Size) {
    return fmt::format("malformed status (struct_size {} is smaller than {})", status->struct_size,
                       kStatusV1Size);
  }
  std::string text = fmt::format("{}: {}", status_code_name(status->code),
                                 status->message != nullptr ? status->message : "(no message)");
  if (status->release != nullptr) status->release(status);
  return text;
}

void throw_if_error(AttnkitStatus* status, std::string_view context) {
  if (auto failure = take_status(status)) {
    throw Error(ErrorCode::kPluginError, fmt::format("{}: {}", context, *failure));
  }
}

}  // namespace attnkit::plugin
