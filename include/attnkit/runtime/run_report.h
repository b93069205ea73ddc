#pragma once
// What `attnkit run` reports: the selection it started from, what really executed per
// KV-cache group (each layer implementation's backend_name(), not the plan), throughput,
// block usage, preemptions and, when asked, the verification error per layer kind.

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "attnkit/core/enums.h"
#include "attnkit/export.h"

namespace attnkit {

struct ATTNKIT_API GroupRunReport {
  int id = 0;
  KvCacheKind kind = KvCacheKind::kFullAttention;
  std::string spec;         // KvCacheSpec::describe()
  std::vector<int> layers;  // model layer indices
  // Backends the selector chose for the group's layers (distinct, in layer order), and
  // why (e.g. "auto", "per-kind").
  std::vector<std::string> backends_planned;
  std::string chosen_by;
  // Backends whose implementations actually ran the group's layers (backend_name(),
  // distinct, sorted); empty when no step ran them.
  std::vector<std::string> backends_executed;
  // The same per phase: the backends that ran the group's prefill rows, and its decode
  // rows (different for a per-phase composite, backend/composite_backend.h).
  std::vector<std::string> prefill_backends_executed;
  std::vector<std::string> decode_backends_executed;
  int block_size = 0;         // cache block size (tokens)
  int kernel_block_size = 0;  // tokens per kernel block
  int blocks_peak = 0;        // most blocks the group held at once
  int blocks_total = 0;       // usable blocks of the shared pool
  long forward_calls = 0;
};

struct ATTNKIT_API KindErrorReport {
  KvCacheKind kind = KvCacheKind::kFullAttention;
  double max_rel_error = 0.0;
  long rows_checked = 0;
  int layer = -1, request = -1, position = -1;  // where the max was seen
};

struct ATTNKIT_API VerifyReport {
  double max_rel_error = 0.0;
  double tolerance = 0.0;
  bool passed = false;
  long rows_checked = 0;
  int samples_per_layer_step = 0;  // 0 = every output row
  std::vector<KindErrorReport> by_kind;
};

struct ATTNKIT_API RunReport {
  std::string model;
  std::string platform;
  std::string dtype;
  std::string kv_cache_dtype;
  std::vector<std::string> notes;     // e.g. reductions applied, encoder-only one-pass
  std::vector<std::string> warnings;  // e.g. a backend_per_kind key that matches no layer
  int requests = 0;
  int steps = 0;            // scheduler steps that ran (idle gaps skipped)
  long tokens = 0;          // tokens the model computed (prefill + decode)
  long prefill_tokens = 0;  // of which prompt (and recomputed) tokens
  long decode_tokens = 0;
  long generated_tokens = 0;  // tokens sampled (output_len per request)
  long encoder_tokens = 0;    // encoder-decoder: encoder tokens encoded
  // Seconds spent in the engine path: scheduling, block tables, metadata builds and
  // forward calls (synthesising inputs and verifying are excluded).
  double engine_seconds = 0.0;
  double attention_seconds = 0.0;   // forward calls only
  double wall_seconds = 0.0;        // everything, verification included
  double tokens_per_s = 0.0;        // tokens / engine_seconds
  double attention_bytes = 0.0;     // Q, K/V read and written, outputs
  double attention_gb_per_s = 0.0;  // attention_bytes / attention_seconds / 1e9
  int preemptions = 0;
  int blocks_peak = 0;   // most pool blocks in use at once (all groups)
  int blocks_total = 0;  // usable pool blocks (null block excluded)
  size_t kv_cache_bytes = 0;
  int num_attention_layers = 0;
  // A hash of every output byte of every forward call, in order: equal for equal runs.
  uint64_t output_checksum = 0;
  std::vector<GroupRunReport> groups;
  std::optional<VerifyReport> verify;
};

// For programs (docs/schemas/run.schema.json): schema_version, model, platform, requests,
// steps, tokens, tokens_per_s, preemptions, kv_cache_groups [{id, kind, layers,
// backends_planned, backends_executed (lists; backend_planned/backend_executed the same
// joined as "A+B"), blocks_peak, blocks_total, ...}], verify {max_rel_error, tolerance,
// passed, ...} or null, plus the other fields above.
ATTNKIT_API nlohmann::json to_json(const RunReport& report);
// The human summary printed after the progress bar.
ATTNKIT_API std::string to_text(const RunReport& report);
// "0-4,6-10,12" for sorted layer indices.
ATTNKIT_API std::string format_layer_ranges(const std::vector<int>& layers);

}  // namespace attnkit
