#pragma once
// The runtime's oracle: recomputes an attention output with straightforward dense
// attention (double accumulation) over the request's whole history, regenerating every
// input from the QkvGenerator, and compares it with what a backend wrote.
//
// Semantics are those of kernels/paged_attention_params.h, restated without paging:
// a decoder query at position p sees keys k <= p, also k > p - sliding_window (window)
// and k / chunk == p / chunk (chunked local); encoder, encoder-only and cross attention
// see all kv_len keys. Scores are scale * <q, k>, soft-capped when soft_cap > 0; sink
// logits join the softmax denominator. Keys and values that went through the paged cache
// are rounded to the cache dtype (fp8 with its scale) exactly as the cache stores them.
// MLA: one latent "head" per token, V = the first head_size_v elements of the latent.
//
// State layers (kind mamba): the expected output of a token is the layer's dense form
// (backend/state_ops.h: the quadratic or from-zero form of the recurrence, in double) over
// the request's inputs from position 0, regenerated from the generator; no cached state
// is involved. Outputs of a (layer, request) are kept once computed, and recomputed over
// a prefix twice as long when a later position is asked for.

#include <map>
#include <span>
#include <string>
#include <vector>

#include "attnkit/backend/backend.h"
#include "attnkit/export.h"
#include "attnkit/runtime/qkv_generator.h"

namespace attnkit {

// One query token whose output is checked.
struct ATTNKIT_API QuerySite {
  int request = 0;
  int position = 0;  // of the query, in its token source (decoder or encoder tokens)
  int kv_len = 0;    // keys of the sequence: causal layers position + 1; else all of them
};

class ATTNKIT_API DenseVerifier {
 public:
  // `generator` must outlive the verifier.
  explicit DenseVerifier(const QkvGenerator& generator) : gen_(generator) {}

  // The expected output of `site` at `layer`: [num_heads * head_size_v], head-major.
  std::vector<float> expected_output(const AttentionLayerParams& layer,
                                     const QuerySite& site) const;
  // A state layer's expected output at (request, position): [output_width()].
  std::vector<float> expected_state_output(const AttentionLayerParams& layer, int request,
                                           int position) const;

 private:
  struct StateOutputs {
    int num_tokens = 0;
    std::vector<float> rows;  // [num_tokens][output_width()]
  };
  const QkvGenerator& gen_;
  mutable std::map<std::pair<int, int>, StateOutputs> state_outputs_;  // (layer, request)
};

// max_d |actual - expected| / max_d |expected| over one output row (0 when both are
// zero; an all-zero expected row compares absolute differences).
ATTNKIT_API double row_relative_error(std::span<const float> actual,
                                      std::span<const float> expected);

// The tolerance --verify applies for a compute dtype: outputs are rounded to it, so bf16
// (8 mantissa bits) allows the most.
ATTNKIT_API double default_tolerance(DType dtype);

// Max relative error per layer kind, accumulated over every checked row.
class ATTNKIT_API VerificationStats {
 public:
  struct KindStats {
    double max_rel_error = 0.0;
    long rows_checked = 0;
    // Where the max was seen, for the report.
    int layer = -1, request = -1, position = -1;
  };
  void add(KvCacheKind kind, double rel_error, int layer, const QuerySite& site);
  const std::map<KvCacheKind, KindStats>& by_kind() const { return by_kind_; }
  double max_rel_error() const;
  long rows_checked() const;

 private:
  std::map<KvCacheKind, KindStats> by_kind_;
};

}  // namespace attnkit
