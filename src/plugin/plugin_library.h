#pragma once
// One loaded plugin library: the dlopen handle, the table attnkit_plugin_init returned and
// the host services handed to it. Every adapter object made from the library (backend,
// builder, plan, implementation) holds a shared_ptr<PluginLibrary>, so the library is
// unloaded only after the last of them is gone.

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "attnkit/plugin_abi.h"

namespace attnkit::plugin {

class PluginLibrary {
 public:
  // dlopens `path`, resolves attnkit_plugin_init, calls it and checks the table's ABI
  // version and layout. Throws Error(kPluginError) saying exactly why it rejects the
  // library: not found, not loadable, missing symbol, init failed, ABI too new/old,
  // malformed table.
  static std::shared_ptr<PluginLibrary> open(const std::string& path);

  PluginLibrary(const PluginLibrary&) = delete;
  PluginLibrary& operator=(const PluginLibrary&) = delete;
  // Calls the table's shutdown() (if any), then dlcloses.
  ~PluginLibrary();

  const std::string& path() const { return path_; }
  const AttnkitPluginTable& table() const { return *table_; }

 private:
  PluginLibrary() = default;

  std::string path_;
  void* handle_ = nullptr;
  const AttnkitPluginTable* table_ = nullptr;
  AttnkitHostApi host_{};  // handed to the plugin; lives as long as the library
};

// Consumes `status` (releases it). nullopt for NULL (success), else "<code>: <message>".
std::optional<std::string> take_status(AttnkitStatus* status);

// Consumes `status`; throws Error(kPluginError) "<context>: <code>: <message>" unless NULL.
void throw_if_error(AttnkitStatus* status, std::string_view context);

}  // namespace attnkit::plugin
