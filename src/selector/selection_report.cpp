#include "attnkit/selector/selection_report.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace attnkit {
namespace {

template <typename T>
nlohmann::json optional_json(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

std::vector<const TuningReport*> tuning_reports(const SelectionResult& result) {
  std::vector<const TuningReport*> out;
  if (result.tuning) out.push_back(&*result.tuning);
  for (const TuningReport& t : result.phase_tuning) out.push_back(&t);
  return out;
}

bool chosen_for_phase(const SelectionResult& result, const CandidateReport& candidate) {
  if (!result.phases || !candidate.phase) return false;
  return candidate.backend ==
         (*candidate.phase == Phase::kPrefill ? result.phases->prefill : result.phases->decode);
}

std::string candidate_status(const SelectionResult& result, const CandidateReport& candidate,
                             bool seen_chosen) {
  if (!candidate.valid()) return fmt::format("rejected: {}", fmt::join(candidate.reasons, "; "));
  if (chosen_for_phase(result, candidate)) return "chosen";
  if (candidate.backend == result.backend && !seen_chosen) return "chosen";
  return "valid (lower priority)";
}

}  // namespace

std::string to_text(const SelectionResult& result, std::string_view indent) {
  std::string out = fmt::format("{}{} layer ({}) on {}{}: {} ({}", indent, to_string(result.kind),
                                result.config.describe(), result.platform,
                                result.platform_is_local ? "" : " (described)", result.backend,
                                to_string(result.chosen_by));
  if (result.requested != kAutoBackend && result.chosen_by == ChosenBy::kAuto) {
    const bool untimed = result.tuning || !result.phase_tuning.empty();
    out += fmt::format("; requested {} {}", result.requested,
                       untimed ? "without the times to decide" : "did not fit");
  }
  out += ")\n";
  if (result.phases) {
    out += fmt::format("{}  prefill rows -> {}, decode rows -> {} (one KV cache)\n", indent,
                       result.phases->prefill, result.phases->decode);
  }
  if (result.priority) {
    out += fmt::format("{}  priority: {} rule '{}' ({}): {}\n", indent,
                       result.priority->from_config ? "config" : "built-in", result.priority->rule,
                       result.priority->condition, fmt::join(result.priority->order, ", "));
  }
  for (const TuningReport* tuning : tuning_reports(result)) {
    out += fmt::format("{}  tuned{}: {}\n", indent,
                       tuning->phase ? fmt::format(" ({} rows)", to_string(*tuning->phase)) : "",
                       tuning->why);
    for (const CandidateTiming& t : tuning->timings) {
      std::vector<std::string> buckets;
      for (const auto& [bucket, us] : t.median_us) {
        buckets.push_back(fmt::format("{} {:.1f} us", bucket, us));
      }
      out += fmt::format("{}    {:<14} {:>10.1f} us total ({}){}\n", indent, t.backend, t.total_us,
                         fmt::join(buckets, ", "), t.measured_now ? " [measured now]" : "");
    }
    for (const std::string& note : tuning->notes) {
      out += fmt::format("{}    note: {}\n", indent, note);
    }
  }
  if (!result.runnable) {
    out += fmt::format("{}  note: this binary cannot run {} there: {}\n", indent, result.backend,
                       result.binary_reason.value_or(""));
  }
  bool seen_chosen = false;
  for (const CandidateReport& candidate : result.candidates) {
    const std::string status = candidate_status(result, candidate, seen_chosen);
    if (status == "chosen" && !candidate.phase) seen_chosen = true;
    const std::string tag =
        candidate.phase ? fmt::format(" [{}{}]", candidate.user_choice ? "user choice, " : "",
                                      to_string(*candidate.phase))
                        : std::string(candidate.user_choice ? " [user choice]" : "");
    out += fmt::format("{}  {:<14} {}{}\n", indent, candidate.backend, status, tag);
    if (candidate.binary_note && candidate.backend != result.backend) {
      out += fmt::format("{}  {:<14} note: {}\n", indent, "", *candidate.binary_note);
    }
  }
  for (const std::string& warning : result.warnings) {
    out += fmt::format("{}  warning: {}\n", indent, warning);
  }
  return out;
}

nlohmann::json to_json(const SelectorConfig& config) {
  return nlohmann::json{
      {"head_size", config.head_size},
      {"head_size_v", config.head_size_v},
      {"num_heads", config.num_heads},
      {"num_kv_heads", config.num_kv_heads},
      {"dtype", to_string(config.dtype)},
      {"kv_cache_dtype", to_string(config.kv_cache_dtype)},
      {"block_size", optional_json(config.block_size)},
      {"use_mla", config.use_mla},
      {"mla_rope_dim", config.mla_rope_dim},
      {"has_sinks", config.has_sinks},
      {"sliding_window", optional_json(config.sliding_window)},
      {"chunk_size", optional_json(config.chunk_size)},
      {"soft_cap", optional_json(config.soft_cap)},
      {"attn_type", to_string(config.attn_type)},
      {"causal", config.is_causal()},
      {"batch_invariant", config.batch_invariant},
      {"kv_connector", config.kv_connector},
  };
}

nlohmann::json to_json(const SelectionResult& result) {
  nlohmann::json phase_tuning = nlohmann::json::array();
  for (const TuningReport& t : result.phase_tuning) phase_tuning.push_back(to_json(t));
  nlohmann::json candidates = nlohmann::json::array();
  for (const CandidateReport& candidate : result.candidates) {
    candidates.push_back({{"backend", candidate.backend},
                          {"valid", candidate.valid()},
                          {"reasons", candidate.reasons},
                          {"binary_note", optional_json(candidate.binary_note)},
                          {"user_choice", candidate.user_choice},
                          {"phase", candidate.phase ? nlohmann::json(to_string(*candidate.phase))
                                                    : nlohmann::json(nullptr)}});
  }
  return nlohmann::json{
      {"kind", to_string(result.kind)},
      {"config", to_json(result.config)},
      {"platform", result.platform},
      {"platform_is_local", result.platform_is_local},
      {"backend", result.backend},
      {"chosen_by", to_string(result.chosen_by)},
      {"requested", result.requested},
      {"override_mode", to_string(result.override_mode)},
      {"runnable", result.runnable},
      {"binary_reason", optional_json(result.binary_reason)},
      {"candidates", candidates},
      {"warnings", result.warnings},
      {"tuning", result.tuning ? to_json(*result.tuning) : nlohmann::json(nullptr)},
      {"phase_tuning", phase_tuning},
      {"priority", result.priority ? to_json(*result.priority) : nlohmann::json(nullptr)},
      {"phases", result.phases ? nlohmann::json{{"prefill", result.phases->prefill},
                                                {"decode", result.phases->decode}}
                               : nlohmann::json(nullptr)},
  };
}

}  // namespace attnkit
