#pragma once
// The global `--plugin PATH` option (repeatable) and the ATTNKIT_PLUGIN_PATH environment
// variable: plugin libraries whose backends are registered before any command runs.

#include <CLI/CLI.hpp>

namespace attnkit::cli {

// Adds --plugin to `app`. When parsing starts, the libraries of ATTNKIT_PLUGIN_PATH are
// loaded into global_registry(); each --plugin PATH is loaded as soon as it is parsed (before
// any command runs). A rejected library throws attnkit::Error naming it and the reason.
void add_plugin_option(CLI::App& app);

}  // namespace attnkit::cli
