#pragma once
// Deterministic synthetic attention inputs. Every query, key and value element is a
// counter-based hash of (seed, stream, layer, request, position, head, dim) mapped to
// [-1, 1) and rounded to the compute dtype, so any token's inputs can be regenerated at
// any time (by the runner, and later by the verifier) without storing them.
//
// Streams: decoder tokens (prompt and generated tokens) and encoder tokens (the encoder
// input of an encoder-decoder request) have separate position spaces. Encoder layers use
// encoder tokens for Q, K and V; cross-attention layers take Q from decoder tokens and
// K/V from encoder tokens; every other layer uses decoder tokens. MLA layers have one KV
// "head" whose key row is the latent vector (V is its prefix), so they use kKey only.
// State layers take one row of input_width() elements per token from kQuery.

#include <cstdint>
#include <vector>

#include "attnkit/backend/backend.h"
#include "attnkit/core/enums.h"
#include "attnkit/core/state_spec.h"
#include "attnkit/export.h"

namespace attnkit {

enum class QkvStream : uint8_t { kQuery, kKey, kValue };
enum class TokenSource : uint8_t { kDecoder, kEncoder };

class ATTNKIT_API QkvGenerator {
 public:
  QkvGenerator(uint64_t seed, DType dtype) : seed_(seed), dtype_(dtype) {}

  uint64_t seed() const { return seed_; }
  DType dtype() const { return dtype_; }

  // One element, already rounded to the compute dtype.
  float value(QkvStream stream, TokenSource source, int layer, int request, int position, int head,
              int dim) const;
  // The row of `heads` x `dim` elements of one token into out[heads * dim] (head-major).
  void fill_row(QkvStream stream, TokenSource source, int layer, int request, int position,
                int heads, int dim, float* out) const;
  // Sink logits of a layer: one per query head, in [0, 2) (in score units, like a
  // checkpoint's learned sinks, large enough to take a visible share of the softmax).
  std::vector<float> sinks(int layer, int num_heads) const;
  // A state layer's parameters (backend/state_params.h), each segment drawn from its
  // StateParamInit range, so that the recurrences stay as stable as a trained model's.
  std::vector<float> state_params(int layer, const StateLayerDims& dims) const;

 private:
  uint64_t seed_;
  DType dtype_;
};

// Where a layer's queries and keys come from.
ATTNKIT_API TokenSource query_source(const AttentionLayerParams& layer);
ATTNKIT_API TokenSource key_source(const AttentionLayerParams& layer);

}  // namespace attnkit
