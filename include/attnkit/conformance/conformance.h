#pragma once
// The conformance suite: checks any AttentionBackend (built-in, plugin, CPU or GPU) against
// the REFERENCE backend over the space its capabilities declare.
//
// generate_cases() turns the backend's capabilities into concrete cases (dtypes, KV-cache
// dtypes, head sizes, GQA ratios, block sizes, KV layouts, attention types, MLA, windows,
// chunks, sinks, soft-capping, batch mixes of prefills, prefill chunks and decodes with
// contexts from 1 to several thousand tokens). run_case() then, for one case:
//   1. builds fresh random inputs on the host from the case's seed: queries, this step's
//      keys/values, a paged cache in the backend's layout and block size whose blocks are
//      in random physical order, holding the earlier context (quantised as the contract
//      says) and large-valued garbage in every unused slot, and the common metadata (block
//      table and slot mapping built directly, without the kv_cache/ layer, so the suite
//      depends on nothing but the backend interface);
//   2. copies them to the backend's memory (DeviceMemory), poisons the output with NaN,
//      builds the backend's plan with its own builder and runs its forward();
//   3. runs REFERENCE on host copies of the same inputs;
//   4. compares the output (relative L2 error against a per-dtype tolerance; any NaN
//      fails, so an unwritten element fails), the cache rows this step wrote (relative L2
//      of the dequantised values, a tolerance far below one storage ulp, so a wrong
//      rounding mode fails), and requires every other cache byte to be left unchanged.
// Cases that validate() rejects (the backend's combination hook) are reported as skipped
// with the backend's reasons; a backend that accepts a case and then throws fails it.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attnkit/backend/backend.h"
#include "attnkit/core/device_memory.h"
#include "attnkit/export.h"

namespace attnkit::conformance {

// How many cases: kQuick for CI (seconds), kFull for a release check (minutes; contexts up
// to several thousand tokens, the cross product of dtypes and KV dtypes).
enum class Budget { kQuick, kFull };

struct ATTNKIT_API ConformanceCase {
  // e.g. "mixed/bf16/kv=fp8_e4m3/h128/q8kv2/bs16/NHD/window=64"
  std::string name;
  AttentionLayerParams layer;
  KvLayout layout = KvLayout::kNHD;
  int block_size = 16;          // kernel block size of the cache and block table
  std::vector<int> query_lens;  // new tokens per request this step
  std::vector<int> seq_lens;    // keys per request after this step (cross: encoder len)
  uint64_t seed = 0;            // the inputs are a function of this seed only

  SelectorConfig selector_config() const;
  // Multiply-adds of the attention (for budgeting).
  double work() const;
};

enum class CaseStatus { kPassed, kFailed, kSkipped };
ATTNKIT_API std::string_view to_string(CaseStatus status);

struct ATTNKIT_API Tolerance {
  double output = 0;  // relative L2 error of the output
  double cache = 0;   // relative L2 error of the dequantised cache rows written this step
};
// The tolerance for a compute dtype and KV-cache dtype.
ATTNKIT_API Tolerance tolerance_for(DType dtype, KvCacheDType kv_cache_dtype);

struct ATTNKIT_API CaseResult {
  std::string name;
  CaseStatus status = CaseStatus::kFailed;
  double output_error = 0;  // NaN when the output held a NaN
  double cache_error = 0;   // 0 when the case writes no cache
  Tolerance tolerance;
  std::string message;  // why it failed or was skipped; empty when it passed
  double seconds = 0;
};

struct ATTNKIT_API ConformanceReport {
  std::string backend;
  std::string platform;
  Budget budget = Budget::kQuick;
  std::vector<CaseResult> results;

  int count(CaseStatus status) const;
  // Every case ran and passed, or was skipped, and at least one ran.
  bool ok() const { return count(CaseStatus::kFailed) == 0 && count(CaseStatus::kPassed) > 0; }
};

struct ATTNKIT_API ConformanceOptions {
  Budget budget = Budget::kQuick;
  uint64_t seed = 2024;
  // Where the backend's tensors live; nullptr = make_device_memory(backend's platform).
  DeviceMemory* memory = nullptr;
  // Only cases whose name contains this text (empty = all).
  std::string filter;
};

ATTNKIT_API std::vector<ConformanceCase> generate_cases(const AttentionBackend& backend,
                                                        Budget budget, uint64_t seed = 2024);

// Runs one case on `platform` (the backend's validate() and binary_reason() decide whether
// it is skipped). Never throws for a backend's failure: it becomes the result.
ATTNKIT_API CaseResult run_case(const AttentionBackend& backend, const ConformanceCase& test_case,
                                const Platform& platform, DeviceMemory& memory);

// Generates and runs every case (filtered). Throws Error when the backend's platform is
// not present here (e.g. a CUDA backend without a GPU).
ATTNKIT_API ConformanceReport run_conformance(const AttentionBackend& backend,
                                              const ConformanceOptions& options = {});

// A fixed-width pass/fail table with a summary line.
ATTNKIT_API std::string format_table(const ConformanceReport& report);
// For programs: docs/schemas/conformance.schema.json (errors are null when not measured).
ATTNKIT_API nlohmann::json to_json(const ConformanceReport& report);

}  // namespace attnkit::conformance
