// attnkit: the command-line tool. Each sub-command lives in its own file (commands.h).
// User errors (attnkit::Error, bad flags) print one message on stderr and exit non-zero.
// Logging (selector warnings, plugin messages) goes to stderr for every command: stdout
// carries only the command's output, which scripts read (--json).
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <iostream>
#include <new>

#include "attnkit/build_config.h"
#include "attnkit/core/error.h"
#include "commands.h"
#include "plugin_option.h"

namespace {

int run(int argc, char** argv) {
  spdlog::set_default_logger(spdlog::stderr_color_mt("attnkit"));
  CLI::App app{
      "attnkit: pluggable attention backends over a paged KV cache. Backends declare what "
      "they can do; the selector picks, for every layer, the best one that can run it.",
      "attnkit"};
  app.set_version_flag("--version", std::string("attnkit ") + ATTNKIT_VERSION_STRING);
  app.require_subcommand(1);
  app.fallthrough();

  attnkit::cli::add_plugin_option(app);
  attnkit::cli::add_backends_command(app);
  attnkit::cli::add_bench_command(app);
  attnkit::cli::add_explain_command(app);
  attnkit::cli::add_run_command(app);
  attnkit::cli::add_tune_command(app);
  attnkit::cli::add_conformance_command(app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const attnkit::Error& e) {
    std::cerr << "attnkit: error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    // Flags are bounded so that no valid combination should get here; if one does, it is
    // the machine's memory that ran out, which the user can act on.
    std::cerr << "attnkit: error: out of memory: this machine cannot hold what the flags ask "
                 "for (make the shape, the request count or the KV cache smaller)\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "attnkit: internal error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}

}  // namespace

// Setting up the logger and the commands may throw too (allocation, a logger name taken):
// nothing escapes main.
int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "attnkit: internal error: " << e.what() << "\n";
  } catch (...) {
    std::cerr << "attnkit: internal error: unknown exception\n";
  }
  return 2;
}
