#pragma once
// Scalar math and the conv steps shared by the state_*.cpp references (state_update.h).
// Everything here is double precision; only what the cache holds is float32.

#include <cmath>
#include <cstdint>
#include <string>

namespace attnkit::state::detail {

// torch.nn.functional.softplus with its default threshold: x itself above 20.
inline double softplus(double x) { return x > 20.0 ? x : std::log1p(std::exp(x)); }
inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
inline double silu(double x) { return x / (1.0 + std::exp(-x)); }

// One token of a causal depthwise conv continuing from `state` [C][K-1] (oldest first):
// out[c] = bias[c] + sum_{j<K-1} w[c][j] state[c][j] + w[c][K-1] x[c], then the state drops
// its oldest value and appends x[c]. The recurrent path's only conv code.
inline void conv_step(int channels, int kernel, const float* weight, const float* bias,
                      const float* x, float* state, double* out) {
  const int s = kernel - 1;
  for (int c = 0; c < channels; ++c) {
    const float* w = weight + int64_t{c} * kernel;
    float* st = state + int64_t{c} * s;
    double acc = bias != nullptr ? double{bias[c]} : 0.0;
    for (int j = 0; j < s; ++j) acc += double{w[j]} * st[j];
    acc += double{w[s]} * x[c];
    out[c] = acc;
    for (int j = 0; j + 1 < s; ++j) st[j] = st[j + 1];
    if (s > 0) st[s - 1] = x[c];
  }
}

// The dense form's conv over a whole sequence from zero, written without a state:
// out[t][c] = bias[c] + sum_j w[c][j] x[t - (K-1) + j] with x[negative] = 0. x [T][C] is
// read as double (the conv input of short conv is a product kept in double), out [T][C].
template <class In>
void conv_sequence(int channels, int kernel, const float* weight, const float* bias, int num_tokens,
                   const In* x, double* out) {
  for (int t = 0; t < num_tokens; ++t) {
    for (int c = 0; c < channels; ++c) {
      double acc = bias != nullptr ? double{bias[c]} : 0.0;
      for (int j = 0; j < kernel; ++j) {
        const int src = t - (kernel - 1) + j;
        if (src >= 0)
          acc += double{weight[int64_t{c} * kernel + j]} * x[int64_t{src} * channels + c];
      }
      out[int64_t{t} * channels + c] = acc;
    }
  }
}

// The conv state after a whole sequence: the last K-1 inputs, zero-padded at the front.
template <class In>
void conv_final_state(int channels, int kernel, int num_tokens, const In* x, float* state) {
  if (state == nullptr) return;
  const int s = kernel - 1;
  for (int c = 0; c < channels; ++c) {
    for (int j = 0; j < s; ++j) {
      const int src = num_tokens - s + j;
      state[int64_t{c} * s + j] =
          src >= 0 ? static_cast<float>(x[int64_t{src} * channels + c]) : 0.0f;
    }
  }
}

// `name` must be positive.
inline std::string positive(const char* name, int64_t value) {
  if (value > 0) return "";
  return std::string(name) + " must be positive (got " + std::to_string(value) + ")";
}

inline std::string required(const char* name, const void* ptr) {
  return ptr != nullptr ? "" : std::string(name) + " must not be null";
}

// The first non-empty reason of a list.
template <class... Reasons>
std::string first_reason(const Reasons&... reasons) {
  std::string out;
  ((out.empty() ? void(out = reasons) : void()), ...);
  return out;
}

}  // namespace attnkit::state::detail
