#include "attnkit/runtime/run_report.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "attnkit/core/json_schema.h"

namespace attnkit {
namespace {

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep;
    out += items[i];
  }
  return out;
}

// One name when all layers agree, else "A+B".
std::string names_or_dash(const std::vector<std::string>& names) {
  return names.empty() ? std::string("-") : join(names, "+");
}

std::string human_bytes(double bytes) {
  if (bytes >= 1024.0 * 1024 * 1024)
    return fmt::format("{:.2f} GiB", bytes / (1024.0 * 1024 * 1024));
  if (bytes >= 1024.0 * 1024) return fmt::format("{:.1f} MiB", bytes / (1024.0 * 1024));
  return fmt::format("{:.1f} KiB", bytes / 1024.0);
}

}  // namespace

std::string format_layer_ranges(const std::vector<int>& layers) {
  std::string out;
  for (size_t i = 0; i < layers.size();) {
    size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1] == layers[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += j == i ? fmt::format("{}", layers[i]) : fmt::format("{}-{}", layers[i], layers[j]);
    i = j + 1;
  }
  return out;
}

nlohmann::json to_json(const RunReport& r) {
  nlohmann::json groups = nlohmann::json::array();
  for (const GroupRunReport& g : r.groups) {
    groups.push_back({
        {"id", g.id},
        {"kind", std::string(to_string(g.kind))},
        {"spec", g.spec},
        {"layers", g.layers},
        {"backend_planned", names_or_dash(g.backends_planned)},
        {"backends_planned", g.backends_planned},
        {"backend_executed", g.backends_executed.empty()
                                 ? nlohmann::json(nullptr)
                                 : nlohmann::json(names_or_dash(g.backends_executed))},
        {"backends_executed", g.backends_executed},
        {"backends_executed_by_phase",
         {{"prefill", g.prefill_backends_executed}, {"decode", g.decode_backends_executed}}},
        {"chosen_by", g.chosen_by},
        {"block_size", g.block_size},
        {"kernel_block_size", g.kernel_block_size},
        {"blocks_peak", g.blocks_peak},
        {"blocks_total", g.blocks_total},
        {"forward_calls", g.forward_calls},
    });
  }
  nlohmann::json verify = nullptr;
  if (r.verify) {
    nlohmann::json kinds = nlohmann::json::array();
    for (const KindErrorReport& k : r.verify->by_kind) {
      kinds.push_back(
          {{"kind", std::string(to_string(k.kind))},
           {"max_rel_error", k.max_rel_error},
           {"rows_checked", k.rows_checked},
           {"worst", {{"layer", k.layer}, {"request", k.request}, {"position", k.position}}}});
    }
    verify = {{"max_rel_error", r.verify->max_rel_error},
              {"tolerance", r.verify->tolerance},
              {"passed", r.verify->passed},
              {"rows_checked", r.verify->rows_checked},
              {"samples_per_layer_step", r.verify->samples_per_layer_step},
              {"by_kind", kinds}};
  }
  return {
      {"schema_version", kJsonSchemaVersion},
      {"model", r.model},
      {"platform", r.platform},
      {"dtype", r.dtype},
      {"kv_cache_dtype", r.kv_cache_dtype},
      {"notes", r.notes},
      {"warnings", r.warnings},
      {"requests", r.requests},
      {"steps", r.steps},
      {"tokens", r.tokens},
      {"prefill_tokens", r.prefill_tokens},
      {"decode_tokens", r.decode_tokens},
      {"generated_tokens", r.generated_tokens},
      {"encoder_tokens", r.encoder_tokens},
      {"engine_seconds", r.engine_seconds},
      {"attention_seconds", r.attention_seconds},
      {"wall_seconds", r.wall_seconds},
      {"tokens_per_s", r.tokens_per_s},
      {"attention_bytes", r.attention_bytes},
      {"attention_gb_per_s", r.attention_gb_per_s},
      {"preemptions", r.preemptions},
      {"blocks_peak", r.blocks_peak},
      {"blocks_total", r.blocks_total},
      {"kv_cache_bytes", r.kv_cache_bytes},
      {"num_attention_layers", r.num_attention_layers},
      {"output_checksum", fmt::format("{:016x}", r.output_checksum)},
      {"kv_cache_groups", groups},
      {"verify", verify},
  };
}

std::string to_text(const RunReport& r) {
  std::string out;
  out += fmt::format(
      "Ran {} requests of {} on {} ({}, KV cache {}): {} steps, {} tokens "
      "({} prefill, {} decode){}\n",
      r.requests, r.model, r.platform, r.dtype, r.kv_cache_dtype, r.steps, r.tokens,
      r.prefill_tokens, r.decode_tokens,
      r.encoder_tokens > 0 ? fmt::format(", {} encoder tokens", r.encoder_tokens) : std::string());
  for (const std::string& note : r.notes) out += fmt::format("  note: {}\n", note);
  for (const std::string& w : r.warnings) out += fmt::format("  warning: {}\n", w);
  out += fmt::format(
      "Throughput: {:.0f} tokens/s (engine {:.3f} s, attention {:.3f} s at "
      "{:.2f} GB/s; wall {:.3f} s)\n",
      r.tokens_per_s, r.engine_seconds, r.attention_seconds, r.attention_gb_per_s, r.wall_seconds);
  out +=
      fmt::format("KV cache: peak {} of {} blocks ({:.0f}%), {}, preemptions: {}\n", r.blocks_peak,
                  r.blocks_total, r.blocks_total > 0 ? 100.0 * r.blocks_peak / r.blocks_total : 0.0,
                  human_bytes(static_cast<double>(r.kv_cache_bytes)), r.preemptions);
  out += "KV-cache groups (planned -> executed):\n";
  for (const GroupRunReport& g : r.groups) {
    const std::string planned = names_or_dash(g.backends_planned);
    const std::string executed = names_or_dash(g.backends_executed);
    const bool same = planned == executed;
    const std::string by_phase = g.prefill_backends_executed == g.decode_backends_executed
                                     ? std::string()
                                     : fmt::format(" [prefill rows: {}; decode rows: {}]",
                                                   names_or_dash(g.prefill_backends_executed),
                                                   names_or_dash(g.decode_backends_executed));
    out +=
        fmt::format("  group {}: {:<48} layers {:<14} {} ({}) -> {}{}{}{}, peak {} blocks\n", g.id,
                    g.spec, format_layer_ranges(g.layers), planned, g.chosen_by, executed, by_phase,
                    same || g.backends_executed.empty() ? "" : "  [differs from the plan]",
                    g.kernel_block_size != g.block_size && g.kernel_block_size > 0
                        ? fmt::format(" (kernel blocks of {})", g.kernel_block_size)
                        : std::string(),
                    g.blocks_peak);
  }
  if (!r.verify) {
    out += "Verification: not requested (--verify checks outputs against dense attention)\n";
  } else {
    const VerifyReport& v = *r.verify;
    out += fmt::format(
        "Verification: {} - max relative error {:.3g} (tolerance {:.3g}) over {} "
        "output rows ({})\n",
        v.passed ? "PASSED" : "FAILED", v.max_rel_error, v.tolerance, v.rows_checked,
        v.samples_per_layer_step == 0
            ? std::string("every row")
            : fmt::format("{} sampled per layer per step", v.samples_per_layer_step));
    for (const KindErrorReport& k : v.by_kind) {
      out += fmt::format(
          "  {:<26} max rel error {:.3g} over {} rows (worst: layer {}, request "
          "{}, position {})\n",
          to_string(k.kind), k.max_rel_error, k.rows_checked, k.layer, k.request, k.position);
    }
  }
  return out;
}

}  // namespace attnkit
