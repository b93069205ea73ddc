// attnkit command-line entry point. Commands are added in their own files (cli/*.cpp).
#include <CLI/CLI.hpp>

#include "attnkit/build_config.h"

int main(int argc, char** argv) {
  CLI::App app{"attnkit: pluggable attention backends over a paged KV cache"};
  app.set_version_flag("--version", std::string("attnkit ") + ATTNKIT_VERSION_STRING);
  CLI11_PARSE(app, argc, argv);
  return 0;
}
