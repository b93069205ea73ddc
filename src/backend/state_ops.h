#pragma once
// One sequence of a recurrent-state layer through the exact reference ops
// (kernels/cpu/state_update.h), from the packed forms the protocol uses
// (attnkit/backend/state_params.h): the parameter vector, and token rows that concatenate
// each token's inputs. The state backends run the recurrent form; the runtime's verifier
// runs the dense form as its oracle.

#include <cstdint>
#include <span>
#include <string>

#include "attnkit/core/state_spec.h"

namespace attnkit {

// Problems with `params` for `dims` (wrong size, a kernel's own check), or "" when usable.
std::string state_params_problem(const StateLayerDims& dims, std::span<const float> params);

// T new tokens of one sequence whose first is at position `start_position`, continuing
// from its state (conv [channels][K-1], recurrent recurrent_shape(), float32, updated in
// place; both all-zero for a fresh sequence). input [T][input_width()], output
// [T][output_width()], float32 rows. Error when params do not fit dims.
void run_state_layer(const StateLayerDims& dims, std::span<const float> params, int num_tokens,
                     int64_t start_position, const float* input, float* output, float* conv_state,
                     float* recurrent_state);

// The same sequence's first num_tokens tokens from position 0, in the dense form (no state).
void run_state_layer_dense(const StateLayerDims& dims, std::span<const float> params,
                           int num_tokens, const float* input, float* output);

}  // namespace attnkit
