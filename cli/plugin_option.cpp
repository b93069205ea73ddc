#include "plugin_option.h"

#include <set>
#include <string>
#include <vector>

#include "attnkit/plugin/plugin_loader.h"

namespace attnkit::cli {

void add_plugin_option(CLI::App& app) {
  // Loading a library twice would register its names twice; the same path given both in
  // the environment and on the command line is loaded once.
  auto loaded = std::make_shared<std::set<std::string>>();
  app.preparse_callback([loaded](size_t /*args*/) {
    for (const PluginLoadReport& report : load_plugins_from_environment()) {
      loaded->insert(report.path);
    }
  });
  app.add_option_function<std::vector<std::string>>(
         "--plugin",
         [loaded](const std::vector<std::string>& paths) {
           for (const std::string& path : paths) {
             if (loaded->insert(path).second) load_plugin(path);
           }
         },
         "Load attention backends from a plugin shared library (repeatable; see "
         "docs/plugins.md). ATTNKIT_PLUGIN_PATH lists more, separated by ':'")
      ->type_name("PATH")
      ->allow_extra_args(false)
      ->trigger_on_parse();
}

}  // namespace attnkit::cli
