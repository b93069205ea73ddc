#include "attnkit/backend/state_params.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "attnkit/core/error.h"

namespace attnkit {
namespace {

size_t sz(int v) { return static_cast<size_t>(v); }

}  // namespace

std::vector<StateParamSegment> state_param_layout(const StateLayerDims& d) {
  using I = StateParamInit;
  const size_t k = sz(d.conv_kernel);
  const size_t c = sz(d.conv_channels());
  switch (d.type) {
    case StateLayerType::kMamba1: {
      const size_t n = sz(d.inner_size), s = sz(d.state_size), r = sz(d.dt_rank);
      return {{"conv_weight", n * k, I::kWeight, k},
              {"conv_bias", n, I::kBias},
              {"x_proj_weight", (r + 2 * s) * n, I::kWeight, n},
              {"dt_proj_weight", n * r, I::kWeight, r},
              {"dt_proj_bias", n, I::kDtBias},
              {"a_log", n * s, I::kALog},
              {"d_skip", n, I::kSkip}};
    }
    case StateLayerType::kMamba2: {
      const size_t h = sz(d.num_heads);
      return {{"conv_weight", c * k, I::kWeight, k},
              {"conv_bias", c, I::kBias},
              {"dt_bias", h, I::kDtBias},
              {"a_log", h, I::kALog},
              {"d_skip", h, I::kSkip}};
    }
    case StateLayerType::kGatedDeltaNet:
      return {{"conv_weight", c * k, I::kWeight, k},
              {"a_log", sz(d.num_heads), I::kALog},
              {"dt_bias", sz(d.num_heads), I::kDtBias}};
    case StateLayerType::kKimiDeltaAttention:
      return {{"conv_weight", c * k, I::kWeight, k},
              {"a_log", sz(d.num_heads), I::kALog},
              {"dt_bias", sz(d.num_heads) * sz(d.head_k_dim), I::kDtBias}};
    case StateLayerType::kShortConv:
      return {{"conv_weight", sz(d.inner_size) * k, I::kWeight, k}};
    case StateLayerType::kLinearAttention:
      return {{"slope", sz(d.num_heads), I::kSlope}};
    case StateLayerType::kRgLru: {
      const size_t w = sz(d.inner_size), bw = w / sz(d.num_heads);
      return {{"conv_weight", w * k, I::kWeight, k},
              {"conv_bias", w, I::kBias},
              {"input_gate_weight", w * bw, I::kWeight, bw},
              {"input_gate_bias", w, I::kBias},
              {"a_gate_weight", w * bw, I::kWeight, bw},
              {"a_gate_bias", w, I::kBias},
              {"a_param", w, I::kAParam}};
    }
  }
  return {};
}

float state_param_value(const StateParamSegment& s, double u) {
  auto inverse_softplus = [](double y) { return std::log(std::expm1(y)); };
  double v = 0;
  switch (s.init) {
    case StateParamInit::kWeight:
      v = (2 * u - 1) / std::sqrt(static_cast<double>(std::max<size_t>(s.fan_in, 1)));
      break;
    case StateParamInit::kBias:
      v = 0.2 * u - 0.1;
      break;
    case StateParamInit::kALog:
      v = std::log(1.0 + 15.0 * u);
      break;
    case StateParamInit::kDtBias:
      v = inverse_softplus(0.001 + 0.099 * u);
      break;
    case StateParamInit::kSkip:
      v = 0.5 + u;
      break;
    case StateParamInit::kSlope:
      v = 0.01 + 0.49 * u;
      break;
    case StateParamInit::kAParam:
      v = inverse_softplus(0.01 + 0.29 * u);
      break;
  }
  return static_cast<float>(v);
}

size_t state_param_count(const StateLayerDims& dims) {
  size_t n = 0;
  for (const StateParamSegment& s : state_param_layout(dims)) n += s.count;
  return n;
}

std::vector<const float*> state_param_pointers(const StateLayerDims& dims,
                                               std::span<const float> params) {
  const size_t want = state_param_count(dims);
  if (params.size() != want) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} layer: its parameters hold {} floats, but {} needs {} ({})",
                            to_string(dims.type), params.size(), dims.describe(), want,
                            "docs/state_layers.md lists the segments"));
  }
  std::vector<const float*> out;
  size_t offset = 0;
  for (const StateParamSegment& s : state_param_layout(dims)) {
    out.push_back(params.data() + offset);
    offset += s.count;
  }
  return out;
}

std::vector<int> state_input_widths(const StateLayerDims& d) {
  const int c = d.conv_channels();
  switch (d.type) {
    case StateLayerType::kMamba1:
      return {d.inner_size, d.inner_size};
    case StateLayerType::kMamba2:
      return {c, d.num_heads};
    case StateLayerType::kGatedDeltaNet:
      return {c, d.num_heads, d.num_heads};
    case StateLayerType::kKimiDeltaAttention:
      return {c, d.num_heads * d.head_k_dim, d.num_heads};
    case StateLayerType::kShortConv:
      return {d.inner_size, d.inner_size, d.inner_size};
    case StateLayerType::kLinearAttention: {
      const int w = d.num_heads * d.head_dim;
      return {w, w, w};
    }
    case StateLayerType::kRgLru:
      return {d.inner_size};
  }
  return {};
}

}  // namespace attnkit
