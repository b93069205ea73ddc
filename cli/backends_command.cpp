// attnkit backends [--platform P] [--json]
// Lists every registered backend with its capabilities and, for the platform, whether
// this binary can run it there (and why not). The report is attnkit/explain/backends_report.h.
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "attnkit/explain/backends_report.h"
#include "commands.h"
#include "common_options.h"

namespace attnkit::cli {

void add_backends_command(CLI::App& app) {
  struct BackendsOptions {
    std::string platform;
    bool json = false;
  };
  auto options = std::make_shared<BackendsOptions>();
  CLI::App* command =
      app.add_subcommand("backends",
                         "List registered attention backends, their capabilities, and whether this "
                         "binary can run them on the platform");
  add_platform_option(*command, options->platform);
  add_json_flag(*command, options->json);
  command->callback([options] {
    const Platform platform = resolve_platform(options->platform);
    if (options->json) {
      print_json(backends_to_json(platform));
    } else {
      std::cout << backends_to_text(platform);
    }
  });
}

}  // namespace attnkit::cli
