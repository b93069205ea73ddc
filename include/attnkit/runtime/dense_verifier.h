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

 private:
  const QkvGenerator& gen_;
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
