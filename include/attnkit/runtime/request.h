#pragma once
// Requests the runtime serves, and the synthetic workloads `attnkit run` generates.
//
// A request has prompt_len prompt tokens and generates output_len tokens. The model runs
// on every token whose successor is needed: the prompt (prefill, possibly in chunks) and
// then each generated token but the last (one decode step each), so a request computes
// prompt_len + output_len - 1 tokens in all. Encoder-decoder requests also carry an
// encoder input of encoder_len tokens, encoded once when the request is admitted (again
// after a preemption) and read by every cross-attention layer.

#include <cstdint>
#include <string>
#include <vector>

#include "attnkit/export.h"

namespace attnkit {

// Tokens one request may hold (prompt + output): far beyond any model's context, small
// enough that positions and token counts fit an int with room for sums.
inline constexpr int kMaxRequestTokens = 1 << 30;

// Requests one synthetic workload may hold.
inline constexpr int kMaxWorkloadRequests = 1 << 20;

struct ATTNKIT_API RequestSpec {
  int id = 0;            // unique, >= 0; also the generator's request coordinate
  int prompt_len = 1;    // >= 1
  int output_len = 1;    // >= 1 tokens to generate
  int arrival_step = 0;  // the first scheduler step that may admit it
  int encoder_len = 0;   // encoder-decoder models only; 0 otherwise

  // Tokens the model computes over the request's life (prefill + decodes).
  int total_computed_tokens() const { return prompt_len + output_len - 1; }
};

// A random workload, reproducible from its seed.
struct ATTNKIT_API WorkloadOptions {
  int num_requests = 8;
  int min_prompt_len = 16;
  int max_prompt_len = 64;
  int output_len = 8;
  // Requests arrive this many steps apart (0 = all at step 0).
  int arrival_interval = 0;
  // Encoder-decoder models: encoder lengths drawn from [min, max] (0 = no encoder).
  int min_encoder_len = 0;
  int max_encoder_len = 0;
  uint64_t seed = 0;
};

// Request i gets id i, a prompt length drawn uniformly from [min, max], arrival step
// i * arrival_interval. Throws Error(kInvalidArgument) naming a bad option.
ATTNKIT_API std::vector<RequestSpec> make_workload(const WorkloadOptions& options);

// Parses "MIN:MAX" or "N" (MIN = MAX = N), both >= 1, into {min, max}. Throws
// Error(kInvalidArgument) naming the text and the expected form.
ATTNKIT_API std::pair<int, int> parse_length_range(const std::string& text,
                                                   const std::string& what);

}  // namespace attnkit
