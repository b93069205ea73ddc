// attnkit conformance --backend NAME [--full] [--json] [--filter TEXT] [--seed N] [--list]
// Runs the conformance suite (attnkit/conformance/conformance.h) for one registered
// backend: every case its capabilities declare, against REFERENCE, on fresh random inputs.
// Prints a pass/fail table (or JSON) and exits non-zero when any case fails.

#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "attnkit/conformance/conformance.h"
#include "attnkit/core/error.h"
#include "attnkit/registry/registry.h"
#include "commands.h"
#include "common_options.h"

namespace attnkit::cli {
namespace {

struct ConformanceCommandOptions {
  std::string backend;
  bool full = false;
  bool json = false;
  bool list = false;
  std::string filter;
  uint64_t seed = 2024;
};

void run_conformance_command(const ConformanceCommandOptions& o) {
  std::shared_ptr<const AttentionBackend> backend = global_registry().get(o.backend);
  const conformance::Budget budget =
      o.full ? conformance::Budget::kFull : conformance::Budget::kQuick;
  if (o.list) {
    for (const conformance::ConformanceCase& c :
         conformance::generate_cases(*backend, budget, o.seed)) {
      if (o.filter.empty() || c.name.find(o.filter) != std::string::npos) {
        std::cout << c.name << "\n";
      }
    }
    return;
  }
  conformance::ConformanceOptions options;
  options.budget = budget;
  options.seed = o.seed;
  options.filter = o.filter;
  const conformance::ConformanceReport report = conformance::run_conformance(*backend, options);
  if (o.json) {
    print_json(conformance::to_json(report));
  } else {
    std::cout << conformance::format_table(report);
  }
  if (report.count(conformance::CaseStatus::kFailed) > 0) {
    throw Error(ErrorCode::kUnsupported,
                fmt::format("backend {} failed {} of {} conformance cases", report.backend,
                            report.count(conformance::CaseStatus::kFailed), report.results.size()));
  }
  if (report.count(conformance::CaseStatus::kPassed) == 0) {
    throw Error(ErrorCode::kUnsupported,
                fmt::format("no conformance case ran for backend {}{}", report.backend,
                            o.filter.empty() ? "" : fmt::format(" (filter '{}')", o.filter)));
  }
}

}  // namespace

void add_conformance_command(CLI::App& app) {
  auto options = std::make_shared<ConformanceCommandOptions>();
  CLI::App* command = app.add_subcommand(
      "conformance",
      "Check a backend against REFERENCE over every case its capabilities declare; exits "
      "non-zero when a case fails");
  command->add_option("--backend", options->backend, "Registered backend to check (e.g. CPU_FLASH)")
      ->required();
  command->add_flag("--full", options->full,
                    "Run the full case budget (long contexts, dtype cross products; minutes) "
                    "instead of the quick one");
  add_json_flag(*command, options->json);
  command->add_option("--filter", options->filter,
                      "Only cases whose name contains this text (e.g. window, kv=fp8_e4m3)");
  command->add_option("--seed", options->seed, "Seed of the random inputs")
      ->capture_default_str()
      ->check(seed_text());
  command->add_flag("--list", options->list, "List the cases without running them");
  command->callback([options] { run_conformance_command(*options); });
}

}  // namespace attnkit::cli
