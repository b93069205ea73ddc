#pragma once
// The recurrent state of one layer of a hybrid model (vLLM's MambaSpec): what a request
// keeps between steps instead of per-token K/V. Two parts, both per request:
//   conv state      [conv_channels][conv_kernel - 1]   the last conv_kernel - 1 inputs of
//                                                     the layer's causal depthwise
//                                                     convolution, oldest first
//   recurrent state recurrent_shape()                 the SSM / delta-rule / linear-attention
//                                                     state
// Both are float32: the recurrent state accumulates over the whole sequence, and a conv
// input may be a product (LFM2's b * x) that the compute dtype would round, so a sequence
// split into chunks gives exactly the outputs of one call. (vLLM keeps the conv state in
// the model dtype; that costs a request about 2% more state here.)
// In a state block the conv state comes first and the recurrent state follows at
// recurrent_offset().
// Which sizes matter per type (0 elsewhere); D = inner_size:
//   mamba1               D, state_size N, dt_rank, conv_kernel K: conv [D][K-1], state [D][N]
//   mamba2               num_heads H, head_dim P, n_groups G, state_size N, K:
//                        conv [H*P + 2*G*N][K-1], state [H][P][N]
//   gated_delta_net,     num_k_heads Hk, head_k_dim dk, num_heads Hv (value heads),
//   kimi_delta_attention head_dim dv, K: conv [2*Hk*dk + Hv*dv][K-1], state [Hv][dk][dv]
//   short_conv           inner_size (hidden), K: conv [hidden][K-1], no recurrent state
//   linear_attention     num_heads H, head_dim d: no conv, state [H][d][d]
//   rg_lru               inner_size W (lru width), num_heads (gate blocks), K:
//                        conv [W][K-1], state [W]

#include <cstddef>
#include <string>
#include <vector>

#include "attnkit/core/enums.h"
#include "attnkit/export.h"

namespace attnkit {

struct ATTNKIT_API StateLayerDims {
  StateLayerType type = StateLayerType::kMamba2;
  int num_heads = 0;    // mamba2 H; delta rules Hv; linear attention H; rg_lru gate blocks
  int head_dim = 0;     // mamba2 P; delta rules dv; linear attention d
  int num_k_heads = 0;  // delta rules Hk
  int head_k_dim = 0;   // delta rules dk
  int state_size = 0;   // mamba1 / mamba2 N
  int n_groups = 0;     // mamba2 G
  int inner_size = 0;   // mamba1 D; short_conv hidden; rg_lru W
  int dt_rank = 0;      // mamba1
  int conv_kernel = 0;  // width of the causal convolution; 0 = none (linear attention)
  ScalarType conv_dtype = ScalarType::kFloat32;
  ScalarType recurrent_dtype = ScalarType::kFloat32;

  bool operator==(const StateLayerDims&) const = default;

  // Channels of the causal convolution (0 when there is none).
  int conv_channels() const;
  // Width of one token's input to the layer's state operation, and of its output.
  int input_width() const;
  int output_width() const;
  std::vector<int> conv_shape() const;       // [channels, K-1], empty without convolution
  std::vector<int> recurrent_shape() const;  // empty without recurrent state
  size_t conv_elems() const;
  size_t recurrent_elems() const;
  // Byte offset of the recurrent state in a state block: the conv state's bytes rounded
  // up to 16, so the float32 state is aligned.
  size_t recurrent_offset() const;
  // Bytes one request's state takes in this layer: recurrent_offset() + recurrent bytes.
  size_t bytes() const;
  // e.g. "gated_delta_net 16x128 keys, 32x128 values, conv 4"
  std::string describe() const;
};

// Errors (kInvalidArgument) naming the first size that is missing or out of range for
// the type; nothing when the dims are consistent.
ATTNKIT_API void validate_state_dims(const StateLayerDims& dims);

}  // namespace attnkit
