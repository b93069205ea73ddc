// Causal depthwise conv1d with state and LFM2's short conv (state_update.h, part 1).

#include <vector>

#include "kernels/cpu/state_common.h"
#include "kernels/cpu/state_update.h"

namespace attnkit::state {

using detail::conv_final_state;
using detail::conv_sequence;
using detail::conv_step;

namespace {

double activate(ConvActivation act, double v) {
  return act == ConvActivation::kSilu ? detail::silu(v) : v;
}

}  // namespace

std::string validate(const CausalConvParams& p) {
  return detail::first_reason(detail::positive("channels", p.channels),
                              detail::positive("kernel_size", p.kernel_size),
                              detail::required("weight", p.weight));
}

StateSizes causal_conv_state_sizes(const CausalConvParams& p) {
  return {int64_t{p.channels} * (p.kernel_size - 1), 0};
}

void causal_conv(const CausalConvParams& p, int num_tokens, const float* x, float* out,
                 float* conv_state) {
  const int C = p.channels;
  std::vector<double> acc(C);
  std::vector<float> row(C);  // out may alias x: read the row before writing it
  for (int t = 0; t < num_tokens; ++t) {
    const float* xt = x + int64_t{t} * C;
    for (int c = 0; c < C; ++c) row[c] = xt[c];
    conv_step(C, p.kernel_size, p.weight, p.bias, row.data(), conv_state, acc.data());
    float* ot = out + int64_t{t} * C;
    for (int c = 0; c < C; ++c) ot[c] = static_cast<float>(activate(p.activation, acc[c]));
  }
}

void causal_conv_dense(const CausalConvParams& p, int num_tokens, const float* x, float* out,
                       float* final_conv_state) {
  const int C = p.channels;
  std::vector<float> input(x, x + int64_t{num_tokens} * C);  // out may alias x
  std::vector<double> acc(int64_t{num_tokens} * C);
  conv_sequence(C, p.kernel_size, p.weight, p.bias, num_tokens, input.data(), acc.data());
  for (size_t i = 0; i < acc.size(); ++i)
    out[i] = static_cast<float>(activate(p.activation, acc[i]));
  conv_final_state(C, p.kernel_size, num_tokens, input.data(), final_conv_state);
}

std::string validate(const ShortConvParams& p) {
  return detail::first_reason(detail::positive("hidden", p.hidden),
                              detail::positive("kernel_size", p.kernel_size),
                              detail::required("weight", p.weight));
}

StateSizes short_conv_state_sizes(const ShortConvParams& p) {
  return {int64_t{p.hidden} * (p.kernel_size - 1), 0};
}

void short_conv(const ShortConvParams& p, int num_tokens, const float* b, const float* c,
                const float* x, float* out, float* conv_state) {
  const int H = p.hidden;
  std::vector<float> bx(H);
  std::vector<double> acc(H);
  for (int t = 0; t < num_tokens; ++t) {
    const int64_t row = int64_t{t} * H;
    // The product is rounded to float32 here because the state stores it as float32: the
    // token it came from must see the same value as the tokens after a chunk boundary.
    for (int i = 0; i < H; ++i) bx[i] = static_cast<float>(double{b[row + i]} * x[row + i]);
    conv_step(H, p.kernel_size, p.weight, p.bias, bx.data(), conv_state, acc.data());
    for (int i = 0; i < H; ++i) out[row + i] = static_cast<float>(double{c[row + i]} * acc[i]);
  }
}

void short_conv_dense(const ShortConvParams& p, int num_tokens, const float* b, const float* c,
                      const float* x, float* out, float* final_conv_state) {
  const int H = p.hidden;
  const int64_t n = int64_t{num_tokens} * H;
  std::vector<double> bx(n), acc(n);
  for (int64_t i = 0; i < n; ++i) bx[i] = double{b[i]} * x[i];
  conv_sequence(H, p.kernel_size, p.weight, p.bias, num_tokens, bx.data(), acc.data());
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(double{c[i]} * acc[i]);
  conv_final_state(H, p.kernel_size, num_tokens, bx.data(), final_conv_state);
}

}  // namespace attnkit::state
