#pragma once
// The parameters and per-token inputs of a recurrent-state layer, as a state backend's
// forward() takes them (the math is in docs/state_layers.md).
//
// Parameters: AttentionLayerParams::state_params is one float32 vector, the segments below
// one after another in this order (each row-major):
//   mamba1               conv_weight [D][K], conv_bias [D], x_proj_weight [R+2N][D],
//                        dt_proj_weight [D][R], dt_proj_bias [D], a_log [D][N], d_skip [D]
//   mamba2               conv_weight [C][K], conv_bias [C], dt_bias [H], a_log [H], d_skip [H]
//                        (C = H*P + 2*G*N)
//   gated_delta_net      conv_weight [C][K], a_log [Hv], dt_bias [Hv]   (C = 2*Hk*dk + Hv*dv)
//   kimi_delta_attention conv_weight [C][K], a_log [Hv], dt_bias [Hv][dk]
//   short_conv           conv_weight [H][K]
//   linear_attention     slope [H]
//   rg_lru               conv_weight [W][K], conv_bias [W], input_gate_weight [B][W/B][W/B],
//                        input_gate_bias [W], a_gate_weight [B][W/B][W/B], a_gate_bias [W],
//                        a_param [W]   (B = gate blocks)
// Inputs: the layer's query tensor is [T, input_width()] in the compute dtype, each row the
// concatenation of that token's inputs; the output is [T, output_width()]:
//   mamba1               x [D] | z [D]                 -> y [D]
//   mamba2               xBC [C] | dt [H]              -> y [H][P]
//   gated_delta_net      qkv [C] | a [Hv] | b [Hv]     -> o [Hv][dv]
//   kimi_delta_attention qkv [C] | g [Hv][dk] | b [Hv] -> o [Hv][dv]
//                        (log decay g' = -exp(a_log) * softplus(g + dt_bias), as vLLM's
//                        KDA gate computes it before its kernel)
//   short_conv           b [H] | c [H] | x [H]         -> c * conv(b * x) [H]
//   linear_attention     q [H][d] | k [H][d] | v [H][d] -> o [H][d]
//   rg_lru               x [W]                         -> h [W]

#include <cstddef>
#include <span>
#include <string_view>
#include <vector>

#include "attnkit/core/state_spec.h"
#include "attnkit/export.h"

namespace attnkit {

// How a parameter segment is drawn when a test or `attnkit run` makes random weights: the
// range a trained model's values fall in, so that the recurrences stay stable.
enum class StateParamInit {
  kWeight,  // uniform in +-1/sqrt(fan_in)
  kBias,    // uniform in +-0.1
  kALog,    // log of uniform [1, 16] (Mamba's A initialisation)
  kDtBias,  // inverse softplus of uniform [0.001, 0.1] (Mamba's dt initialisation)
  kSkip,    // uniform [0.5, 1.5]
  kSlope,   // uniform [0.01, 0.5] (decay rates)
  kAParam,  // RG-LRU: inverse softplus of uniform [0.01, 0.3] (slow decays)
};

struct ATTNKIT_API StateParamSegment {
  std::string_view name;
  size_t count = 0;
  StateParamInit init = StateParamInit::kWeight;
  size_t fan_in = 1;  // kWeight
};

// The value of `segment` for a uniform draw u in [0, 1), in the segment's init range.
ATTNKIT_API float state_param_value(const StateParamSegment& segment, double u);

// The segments of `dims`' parameter vector, in order.
ATTNKIT_API std::vector<StateParamSegment> state_param_layout(const StateLayerDims& dims);
// Floats in the whole vector: the sum of the segments' counts.
ATTNKIT_API size_t state_param_count(const StateLayerDims& dims);

// The segments' offsets into the vector (same order as state_param_layout), with a check
// that `params` has exactly state_param_count() floats (Error naming both sizes).
ATTNKIT_API std::vector<const float*> state_param_pointers(const StateLayerDims& dims,
                                                           std::span<const float> params);

// One input segment of a token's row: its width.
ATTNKIT_API std::vector<int> state_input_widths(const StateLayerDims& dims);

}  // namespace attnkit
