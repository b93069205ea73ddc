// Mamba2 / SSD (state_update.h, part 3): the recurrent step and the quadratic SSD form.

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/state_common.h"
#include "kernels/cpu/state_update.h"

namespace attnkit::state {

namespace {

struct Dims {
  int H, P, G, N, D, GN, W;  // W: the conv width D + 2GN
  int heads_per_group;
};

Dims dims_of(const Mamba2Params& p) {
  const int D = p.num_heads * p.head_dim, GN = p.n_groups * p.d_state;
  return {p.num_heads, p.head_dim, p.n_groups, p.d_state,
          D,           GN,         D + 2 * GN, p.num_heads / p.n_groups};
}

double time_step(const Mamba2Params& p, int h, float dt_raw) {
  const double dt = detail::softplus(double{dt_raw} + p.dt_bias[h]);
  return std::clamp(dt, double{p.dt_min}, double{p.dt_max});
}

double skip(const Mamba2Params& p, int h) { return p.d_skip != nullptr ? p.d_skip[h] : 0.0; }

}  // namespace

std::string validate(const Mamba2Params& p) {
  std::string reason = detail::first_reason(
      detail::positive("num_heads", p.num_heads), detail::positive("head_dim", p.head_dim),
      detail::positive("n_groups", p.n_groups), detail::positive("d_state", p.d_state),
      detail::positive("conv_kernel", p.conv_kernel),
      detail::required("conv_weight", p.conv_weight), detail::required("dt_bias", p.dt_bias),
      detail::required("a_log", p.a_log));
  if (reason.empty() && p.num_heads % p.n_groups != 0) {
    reason = "n_groups (" + std::to_string(p.n_groups) + ") must divide num_heads (" +
             std::to_string(p.num_heads) + ")";
  }
  if (reason.empty() && !(p.dt_min <= p.dt_max)) reason = "dt_min must not exceed dt_max";
  return reason;
}

StateSizes mamba2_state_sizes(const Mamba2Params& p) {
  const Dims m = dims_of(p);
  return {int64_t{m.W} * (p.conv_kernel - 1), int64_t{m.H} * m.P * m.N};
}

void mamba2(const Mamba2Params& p, int num_tokens, const float* xbc, const float* dt, float* y,
            float* conv_state, float* ssm_state) {
  const Dims m = dims_of(p);
  std::vector<double> a(m.H), xc(m.W);
  for (int h = 0; h < m.H; ++h) a[h] = -std::exp(double{p.a_log[h]});
  for (int t = 0; t < num_tokens; ++t) {
    detail::conv_step(m.W, p.conv_kernel, p.conv_weight, p.conv_bias, xbc + int64_t{t} * m.W,
                      conv_state, xc.data());
    for (double& v : xc) v = detail::silu(v);
    const double* x = xc.data();
    const double* B = x + m.D;
    const double* C = B + m.GN;
    for (int h = 0; h < m.H; ++h) {
      const double dth = time_step(p, h, dt[int64_t{t} * m.H + h]);
      const double decay = std::exp(dth * a[h]);
      const int g = h / m.heads_per_group;
      const double* Bg = B + int64_t{g} * m.N;
      const double* Cg = C + int64_t{g} * m.N;
      for (int i = 0; i < m.P; ++i) {
        const double xv = x[int64_t{h} * m.P + i];
        float* s = ssm_state + (int64_t{h} * m.P + i) * m.N;
        double acc = 0.0;
        for (int n = 0; n < m.N; ++n) {
          const double sn = decay * s[n] + dth * Bg[n] * xv;
          s[n] = static_cast<float>(sn);
          acc += Cg[n] * sn;
        }
        y[int64_t{t} * m.D + int64_t{h} * m.P + i] = static_cast<float>(acc + skip(p, h) * xv);
      }
    }
  }
}

// y_t[h][p] = sum_{s<=t} L[t][s] (C_t[g] . B_s[g]) dt_s[h] x_s[h][p] + Dskip[h] x_t[h][p],
// L[t][s] = exp(cum_t - cum_s), cum_t = A[h] sum_{r<=t} dt_r[h].
void mamba2_dense(const Mamba2Params& p, int num_tokens, const float* xbc, const float* dt,
                  float* y, float* final_conv_state, float* final_ssm_state) {
  const Dims m = dims_of(p);
  const int T = num_tokens;
  std::vector<double> xc(int64_t{T} * m.W), cum(T), dts(T), out(int64_t{T} * m.D, 0.0);
  detail::conv_sequence(m.W, p.conv_kernel, p.conv_weight, p.conv_bias, T, xbc, xc.data());
  for (double& v : xc) v = detail::silu(v);
  auto x_of = [&](int t, int h, int i) { return xc[int64_t{t} * m.W + int64_t{h} * m.P + i]; };
  auto b_of = [&](int t, int g, int n) {
    return xc[int64_t{t} * m.W + m.D + int64_t{g} * m.N + n];
  };
  auto c_of = [&](int t, int g, int n) {
    return xc[int64_t{t} * m.W + m.D + m.GN + int64_t{g} * m.N + n];
  };
  for (int h = 0; h < m.H; ++h) {
    const double A = -std::exp(double{p.a_log[h]});
    const int g = h / m.heads_per_group;
    double run = 0.0;
    for (int t = 0; t < T; ++t) {
      const double raw = detail::softplus(double{dt[int64_t{t} * m.H + h]} + p.dt_bias[h]);
      dts[t] = std::min(std::max(raw, double{p.dt_min}), double{p.dt_max});
      run += dts[t] * A;
      cum[t] = run;
    }
    for (int t = 0; t < T; ++t) {
      for (int s = 0; s <= t; ++s) {
        double cb = 0.0;
        for (int n = 0; n < m.N; ++n) cb += c_of(t, g, n) * b_of(s, g, n);
        const double coef = std::exp(cum[t] - cum[s]) * cb * dts[s];
        for (int i = 0; i < m.P; ++i)
          out[int64_t{t} * m.D + int64_t{h} * m.P + i] += coef * x_of(s, h, i);
      }
      for (int i = 0; i < m.P; ++i) {
        const int64_t o = int64_t{t} * m.D + int64_t{h} * m.P + i;
        y[o] = static_cast<float>(out[o] + skip(p, h) * x_of(t, h, i));
      }
    }
    if (final_ssm_state == nullptr) continue;
    for (int i = 0; i < m.P; ++i) {
      for (int n = 0; n < m.N; ++n) {
        double s_final = 0.0;
        for (int s = 0; s < T; ++s) {
          s_final += std::exp(cum[T - 1] - cum[s]) * dts[s] * b_of(s, g, n) * x_of(s, h, i);
        }
        final_ssm_state[(int64_t{h} * m.P + i) * m.N + n] = static_cast<float>(s_final);
      }
    }
  }
  detail::conv_final_state(m.W, p.conv_kernel, T, xbc, final_conv_state);
}

}  // namespace attnkit::state
