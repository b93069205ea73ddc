// Text and JSON forms of a conformance report.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "attnkit/conformance/conformance.h"
#include "attnkit/core/json_schema.h"

namespace attnkit::conformance {
namespace {

std::string number(double x) { return std::isnan(x) ? "nan" : fmt::format("{:.2e}", x); }

nlohmann::json json_number(double x) {
  return std::isnan(x) ? nlohmann::json(nullptr) : nlohmann::json(x);
}

}  // namespace

std::string format_table(const ConformanceReport& report) {
  size_t width = 4;
  for (const CaseResult& r : report.results) width = std::max(width, r.name.size());
  std::string out =
      fmt::format("Conformance of {} against REFERENCE on {} ({} budget)\n\n", report.backend,
                  report.platform, report.budget == Budget::kFull ? "full" : "quick");
  out += fmt::format("{:<6} {:<{}} {:>9} {:>9} {:>9} {:>9}  {}\n", "status", "case", width,
                     "out err", "out tol", "kv err", "kv tol", "note");
  for (const CaseResult& r : report.results) {
    const bool ran = r.status != CaseStatus::kSkipped;
    out += fmt::format("{:<6} {:<{}} {:>9} {:>9} {:>9} {:>9}  {}\n", to_string(r.status), r.name,
                       width, ran ? number(r.output_error) : "-", number(r.tolerance.output),
                       ran ? number(r.cache_error) : "-", number(r.tolerance.cache), r.message);
  }
  out += fmt::format("\n{}: {} passed, {} failed, {} skipped of {} cases\n", report.backend,
                     report.count(CaseStatus::kPassed), report.count(CaseStatus::kFailed),
                     report.count(CaseStatus::kSkipped), report.results.size());
  return out;
}

nlohmann::json to_json(const ConformanceReport& report) {
  nlohmann::json cases = nlohmann::json::array();
  for (const CaseResult& r : report.results) {
    cases.push_back({{"name", r.name},
                     {"status", to_string(r.status)},
                     {"output_error", json_number(r.output_error)},
                     {"output_tolerance", r.tolerance.output},
                     {"cache_error", json_number(r.cache_error)},
                     {"cache_tolerance", r.tolerance.cache},
                     {"message", r.message},
                     {"seconds", r.seconds}});
  }
  return {{"schema_version", kJsonSchemaVersion},
          {"backend", report.backend},
          {"platform", report.platform},
          {"budget", report.budget == Budget::kFull ? "full" : "quick"},
          {"passed", report.count(CaseStatus::kPassed)},
          {"failed", report.count(CaseStatus::kFailed)},
          {"skipped", report.count(CaseStatus::kSkipped)},
          {"ok", report.ok()},
          {"cases", cases}};
}

}  // namespace attnkit::conformance
