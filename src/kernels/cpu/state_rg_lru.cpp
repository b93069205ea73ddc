// RG-LRU, RecurrentGemma's recurrent block core (state_update.h, part 6): the recurrent step
// and the closed form over the whole sequence.

#include <cmath>
#include <vector>

#include "kernels/cpu/state_common.h"
#include "kernels/cpu/state_update.h"

namespace attnkit::state {

namespace {

// The two block-diagonal gates at one token: for w = blk * bw + j,
// gate[w] = sigmoid(bias[w] + sum_i xc[blk * bw + i] weight[blk][i][j]).
void gates(const RgLruParams& p, const double* xc, double* gate_x, double* gate_a) {
  const int bw = p.width / p.num_blocks;
  for (int blk = 0; blk < p.num_blocks; ++blk) {
    const double* in = xc + int64_t{blk} * bw;
    const float* wx = p.input_gate_weight + int64_t{blk} * bw * bw;
    const float* wa = p.a_gate_weight + int64_t{blk} * bw * bw;
    for (int j = 0; j < bw; ++j) {
      const int64_t w = int64_t{blk} * bw + j;
      double ax = p.input_gate_bias[w], aa = p.a_gate_bias[w];
      for (int i = 0; i < bw; ++i) {
        ax += in[i] * wx[int64_t{i} * bw + j];
        aa += in[i] * wa[int64_t{i} * bw + j];
      }
      gate_x[j + int64_t{blk} * bw] = detail::sigmoid(ax);
      gate_a[j + int64_t{blk} * bw] = detail::sigmoid(aa);
    }
  }
}

// sqrt(1 - a^2) with a = exp(log_a), through expm1 so that a close to 1 keeps its digits.
double input_multiplier(double log_a) { return std::sqrt(-std::expm1(2.0 * log_a)); }

}  // namespace

std::string validate(const RgLruParams& p) {
  std::string reason = detail::first_reason(
      detail::positive("width", p.width), detail::positive("num_blocks", p.num_blocks),
      detail::positive("conv_kernel", p.conv_kernel),
      detail::required("conv_weight", p.conv_weight),
      detail::required("input_gate_weight", p.input_gate_weight),
      detail::required("input_gate_bias", p.input_gate_bias),
      detail::required("a_gate_weight", p.a_gate_weight),
      detail::required("a_gate_bias", p.a_gate_bias), detail::required("a_param", p.a_param));
  if (reason.empty() && p.width % p.num_blocks != 0) {
    reason = "num_blocks (" + std::to_string(p.num_blocks) + ") must divide width (" +
             std::to_string(p.width) + ")";
  }
  return reason;
}

StateSizes rg_lru_state_sizes(const RgLruParams& p) {
  return {int64_t{p.width} * (p.conv_kernel - 1), p.width};
}

void rg_lru(const RgLruParams& p, int num_tokens, int64_t start_position, const float* x,
            float* out, float* conv_state, float* recurrent_state) {
  const int W = p.width;
  std::vector<double> xc(W), gate_x(W), gate_a(W), rate(W);
  for (int w = 0; w < W; ++w) rate[w] = -8.0 * detail::softplus(p.a_param[w]);
  for (int t = 0; t < num_tokens; ++t) {
    detail::conv_step(W, p.conv_kernel, p.conv_weight, p.conv_bias, x + int64_t{t} * W, conv_state,
                      xc.data());
    gates(p, xc.data(), gate_x.data(), gate_a.data());
    // At position 0 the previous state is 0 and the input is not rescaled (HF's reset).
    const bool reset = start_position + t == 0;
    for (int w = 0; w < W; ++w) {
      const double log_a = rate[w] * gate_a[w];
      const double multiplier = reset ? 1.0 : input_multiplier(log_a);
      const double prev = reset ? 0.0 : double{recurrent_state[w]};
      const double h = std::exp(log_a) * prev + multiplier * gate_x[w] * xc[w];
      recurrent_state[w] = static_cast<float>(h);
      out[int64_t{t} * W + w] = static_cast<float>(h);
    }
  }
}

// h_t = sum_{s<=t} exp(cum_t - cum_s) u_s, cum_t = sum_{0<r<=t} log_a_r, u_s = m_s gate_x xc
// with m_0 = 1 (position 0's a never multiplies anything).
void rg_lru_dense(const RgLruParams& p, int num_tokens, const float* x, float* out,
                  float* final_conv_state, float* final_recurrent_state) {
  const int W = p.width, T = num_tokens, bw = p.width / p.num_blocks;
  std::vector<double> xc(int64_t{T} * W), log_a(int64_t{T} * W), u(int64_t{T} * W), cum(T);
  std::vector<double> gate_x(W), gate_a(W);
  detail::conv_sequence(W, p.conv_kernel, p.conv_weight, p.conv_bias, T, x, xc.data());
  for (int t = 0; t < T; ++t) {
    const int64_t row = int64_t{t} * W;
    // The gates, written apart from the recurrent path's gates(): out w = blk * bw + j.
    for (int w = 0; w < W; ++w) {
      const int blk = w / bw, j = w % bw;
      double sx = p.input_gate_bias[w], sa = p.a_gate_bias[w];
      for (int i = 0; i < bw; ++i) {
        const double in = xc[row + int64_t{blk} * bw + i];
        const int64_t at = (int64_t{blk} * bw + i) * bw + j;  // [blk][i (in)][j (out)]
        sx += in * p.input_gate_weight[at];
        sa += in * p.a_gate_weight[at];
      }
      gate_x[w] = 1.0 / (1.0 + std::exp(-sx));
      gate_a[w] = 1.0 / (1.0 + std::exp(-sa));
    }
    for (int w = 0; w < W; ++w) {
      log_a[row + w] = -8.0 * gate_a[w] * detail::softplus(p.a_param[w]);
      const double m = t == 0 ? 1.0 : std::sqrt(1.0 - std::exp(2.0 * log_a[row + w]));
      u[row + w] = m * gate_x[w] * xc[row + w];
    }
  }
  for (int w = 0; w < W; ++w) {
    cum[0] = 0.0;
    for (int t = 1; t < T; ++t) cum[t] = cum[t - 1] + log_a[int64_t{t} * W + w];
    for (int t = 0; t < T; ++t) {
      double h = 0.0;
      for (int s = 0; s <= t; ++s) h += std::exp(cum[t] - cum[s]) * u[int64_t{s} * W + w];
      out[int64_t{t} * W + w] = static_cast<float>(h);
      if (t == T - 1 && final_recurrent_state != nullptr) {
        final_recurrent_state[w] = static_cast<float>(h);
      }
    }
  }
  detail::conv_final_state(W, p.conv_kernel, T, x, final_conv_state);
}

}  // namespace attnkit::state
