#pragma once
// The adapter: one plugin backend descriptor (plain C) seen as an attnkit::AttentionBackend,
// the same interface the built-in backends implement. Its builders, plans and
// implementations wrap the plugin's opaque handles, destroy them through the plugin's
// destroy callbacks, and turn every non-NULL status into Error(kPluginError).

#include <memory>
#include <string>

#include "attnkit/backend/backend.h"
#include "plugin/plugin_library.h"

namespace attnkit::plugin {

// Validates `desc` (struct sizes, required callbacks, capabilities) and returns a backend
// that keeps `library` loaded while it or anything it made lives. Throws Error(kPluginError)
// naming the backend and what is malformed.
std::unique_ptr<AttentionBackend> make_plugin_backend(std::shared_ptr<PluginLibrary> library,
                                                      const AttnkitBackendDesc& desc);

// The name a descriptor declares, upper case; throws Error(kPluginError) when it is missing
// or uses characters other than letters, digits and '_'.
std::string plugin_backend_name(const AttnkitBackendDesc& desc);

}  // namespace attnkit::plugin
