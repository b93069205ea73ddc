#include "backend/state_ops.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "attnkit/backend/state_params.h"
#include "attnkit/core/error.h"
#include "kernels/cpu/state_update.h"

namespace attnkit {
namespace {

// The kernel parameters of one layer, pointing into its parameter vector.
struct KernelParams {
  state::Mamba1Params mamba1;
  state::Mamba2Params mamba2;
  state::DeltaRuleParams delta;
  state::ShortConvParams short_conv;
  state::LinearAttentionParams linear;
  state::RgLruParams rg_lru;
  const float* kda_a_log = nullptr;    // [Hv]
  const float* kda_dt_bias = nullptr;  // [Hv][dk]
};

KernelParams kernel_params(const StateLayerDims& d, std::span<const float> params) {
  const std::vector<const float*> p = state_param_pointers(d, params);
  KernelParams k;
  switch (d.type) {
    case StateLayerType::kMamba1:
      k.mamba1 = {.d_inner = d.inner_size,
                  .d_state = d.state_size,
                  .dt_rank = d.dt_rank,
                  .conv_kernel = d.conv_kernel,
                  .conv_weight = p[0],
                  .conv_bias = p[1],
                  .x_proj_weight = p[2],
                  .dt_proj_weight = p[3],
                  .dt_proj_bias = p[4],
                  .a_log = p[5],
                  .d_skip = p[6]};
      break;
    case StateLayerType::kMamba2:
      k.mamba2 = {.num_heads = d.num_heads,
                  .head_dim = d.head_dim,
                  .n_groups = d.n_groups,
                  .d_state = d.state_size,
                  .conv_kernel = d.conv_kernel,
                  .conv_weight = p[0],
                  .conv_bias = p[1],
                  .dt_bias = p[2],
                  .a_log = p[3],
                  .d_skip = p[4]};
      break;
    case StateLayerType::kGatedDeltaNet:
    case StateLayerType::kKimiDeltaAttention:
      k.delta = {.num_k_heads = d.num_k_heads,
                 .num_v_heads = d.num_heads,
                 .head_k_dim = d.head_k_dim,
                 .head_v_dim = d.head_dim,
                 .conv_kernel = d.conv_kernel,
                 .conv_weight = p[0],
                 .conv_bias = nullptr,
                 .a_log = p[1],
                 .dt_bias = p[2]};
      k.kda_a_log = p[1];
      k.kda_dt_bias = p[2];
      break;
    case StateLayerType::kShortConv:
      k.short_conv = {.hidden = d.inner_size, .kernel_size = d.conv_kernel, .weight = p[0]};
      break;
    case StateLayerType::kLinearAttention:
      k.linear = {.num_heads = d.num_heads, .head_dim = d.head_dim, .slope = p[0]};
      break;
    case StateLayerType::kRgLru:
      k.rg_lru = {.width = d.inner_size,
                  .num_blocks = d.num_heads,
                  .conv_kernel = d.conv_kernel,
                  .conv_weight = p[0],
                  .conv_bias = p[1],
                  .input_gate_weight = p[2],
                  .input_gate_bias = p[3],
                  .a_gate_weight = p[4],
                  .a_gate_bias = p[5],
                  .a_param = p[6]};
      break;
  }
  return k;
}

std::string kernel_problem(const StateLayerDims& d, const KernelParams& k) {
  switch (d.type) {
    case StateLayerType::kMamba1:
      return state::validate(k.mamba1);
    case StateLayerType::kMamba2:
      return state::validate(k.mamba2);
    case StateLayerType::kGatedDeltaNet:
      return state::validate_gated_delta_net(k.delta);
    case StateLayerType::kKimiDeltaAttention:
      return state::validate_kimi_delta_attention(k.delta);
    case StateLayerType::kShortConv:
      return state::validate(k.short_conv);
    case StateLayerType::kLinearAttention:
      return state::validate(k.linear);
    case StateLayerType::kRgLru:
      return state::validate(k.rg_lru);
  }
  return "unknown state layer type";
}

// The input rows split into one contiguous [T][width] array per segment.
std::vector<std::vector<float>> split_inputs(const StateLayerDims& d, int num_tokens,
                                             const float* input) {
  const std::vector<int> widths = state_input_widths(d);
  const size_t row = static_cast<size_t>(d.input_width());
  std::vector<std::vector<float>> out;
  size_t offset = 0;
  for (int w : widths) {
    std::vector<float> part(static_cast<size_t>(num_tokens) * static_cast<size_t>(w));
    for (size_t t = 0; t < static_cast<size_t>(num_tokens); ++t) {
      const float* src = input + t * row + offset;
      std::copy(src, src + w,
                part.begin() + static_cast<std::ptrdiff_t>(t * static_cast<size_t>(w)));
    }
    out.push_back(std::move(part));
    offset += static_cast<size_t>(w);
  }
  return out;
}

double softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }

// KDA's gate, as vLLM computes it before its kernel: g' = -exp(a_log) softplus(g + dt_bias).
void kda_gate(const StateLayerDims& d, const KernelParams& k, std::vector<float>& g) {
  const size_t dk = static_cast<size_t>(d.head_k_dim);
  const size_t per_token = static_cast<size_t>(d.num_heads) * dk;
  for (size_t i = 0; i < g.size(); ++i) {
    const size_t hc = i % per_token;
    const double a = std::exp(static_cast<double>(k.kda_a_log[hc / dk]));
    g[i] = static_cast<float>(-a * softplus(static_cast<double>(g[i]) + k.kda_dt_bias[hc]));
  }
}

KernelParams checked_params(const StateLayerDims& d, std::span<const float> params) {
  KernelParams k = kernel_params(d, params);
  if (std::string problem = kernel_problem(d, k); !problem.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} layer ({}): {}", to_string(d.type), d.describe(), problem));
  }
  return k;
}

}  // namespace

std::string state_params_problem(const StateLayerDims& dims, std::span<const float> params) {
  if (params.size() != state_param_count(dims)) {
    return fmt::format("its parameters hold {} floats, but {} needs {}", params.size(),
                       dims.describe(), state_param_count(dims));
  }
  return kernel_problem(dims, kernel_params(dims, params));
}

void run_state_layer(const StateLayerDims& d, std::span<const float> params, int num_tokens,
                     int64_t start_position, const float* input, float* output, float* conv_state,
                     float* recurrent_state) {
  const KernelParams k = checked_params(d, params);
  std::vector<std::vector<float>> in = split_inputs(d, num_tokens, input);
  const int t = num_tokens;
  switch (d.type) {
    case StateLayerType::kMamba1:
      state::mamba1(k.mamba1, t, in[0].data(), in[1].data(), output, conv_state, recurrent_state);
      break;
    case StateLayerType::kMamba2:
      state::mamba2(k.mamba2, t, in[0].data(), in[1].data(), output, conv_state, recurrent_state);
      break;
    case StateLayerType::kGatedDeltaNet:
      state::gated_delta_net(k.delta, t, in[0].data(), in[1].data(), in[2].data(), output,
                             conv_state, recurrent_state);
      break;
    case StateLayerType::kKimiDeltaAttention:
      kda_gate(d, k, in[1]);
      state::kimi_delta_attention(k.delta, t, in[0].data(), in[1].data(), in[2].data(), output,
                                  conv_state, recurrent_state);
      break;
    case StateLayerType::kShortConv:
      state::short_conv(k.short_conv, t, in[0].data(), in[1].data(), in[2].data(), output,
                        conv_state);
      break;
    case StateLayerType::kLinearAttention:
      state::linear_attention(k.linear, t, in[0].data(), in[1].data(), in[2].data(), output,
                              recurrent_state);
      break;
    case StateLayerType::kRgLru:
      state::rg_lru(k.rg_lru, t, start_position, in[0].data(), output, conv_state, recurrent_state);
      break;
  }
}

void run_state_layer_dense(const StateLayerDims& d, std::span<const float> params, int num_tokens,
                           const float* input, float* output) {
  const KernelParams k = checked_params(d, params);
  std::vector<std::vector<float>> in = split_inputs(d, num_tokens, input);
  const int t = num_tokens;
  switch (d.type) {
    case StateLayerType::kMamba1:
      state::mamba1_dense(k.mamba1, t, in[0].data(), in[1].data(), output, nullptr, nullptr);
      break;
    case StateLayerType::kMamba2:
      state::mamba2_dense(k.mamba2, t, in[0].data(), in[1].data(), output, nullptr, nullptr);
      break;
    case StateLayerType::kGatedDeltaNet:
      state::gated_delta_net_dense(k.delta, t, in[0].data(), in[1].data(), in[2].data(), output,
                                   nullptr, nullptr);
      break;
    case StateLayerType::kKimiDeltaAttention:
      kda_gate(d, k, in[1]);
      state::kimi_delta_attention_dense(k.delta, t, in[0].data(), in[1].data(), in[2].data(),
                                        output, nullptr, nullptr);
      break;
    case StateLayerType::kShortConv:
      state::short_conv_dense(k.short_conv, t, in[0].data(), in[1].data(), in[2].data(), output,
                              nullptr);
      break;
    case StateLayerType::kLinearAttention:
      state::linear_attention_dense(k.linear, t, in[0].data(), in[1].data(), in[2].data(), output,
                                    nullptr);
      break;
    case StateLayerType::kRgLru:
      state::rg_lru_dense(k.rg_lru, t, in[0].data(), output, nullptr, nullptr);
      break;
  }
}

}  // namespace attnkit
