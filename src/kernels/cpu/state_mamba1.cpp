// Mamba1 selective scan (state_update.h, part 2): the recurrent step and the quadratic form.

#include <cmath>
#include <vector>

#include "kernels/cpu/state_common.h"
#include "kernels/cpu/state_update.h"

namespace attnkit::state {

using detail::silu;
using detail::softplus;

namespace {

// v * rsqrt(mean(v^2) + eps) * weight (weight nullptr: ones), in place.
void rms_normalize(double* v, int n, const float* weight, double eps) {
  double ss = 0.0;
  for (int i = 0; i < n; ++i) ss += v[i] * v[i];
  const double inv = 1.0 / std::sqrt(ss / n + eps);
  for (int i = 0; i < n; ++i) v[i] *= inv * (weight != nullptr ? double{weight[i]} : 1.0);
}

// [dt_low (R) | B (N) | C (N)] = x_proj * xc, then the optional inner norms.
void project_x(const Mamba1Params& p, const double* xc, double* proj) {
  const int D = p.d_inner, N = p.d_state, R = p.dt_rank;
  for (int r = 0; r < R + 2 * N; ++r) {
    const float* w = p.x_proj_weight + int64_t{r} * D;
    double acc = 0.0;
    for (int d = 0; d < D; ++d) acc += double{w[d]} * xc[d];
    proj[r] = acc;
  }
  if (p.inner_rms_norm) {
    rms_normalize(proj, R, p.dt_norm_weight, p.inner_rms_eps);
    rms_normalize(proj + R, N, p.b_norm_weight, p.inner_rms_eps);
    rms_normalize(proj + R + N, N, p.c_norm_weight, p.inner_rms_eps);
  }
}

// dt[d] = softplus(dt_proj[d] . dt_low + dt_bias[d]).
void time_steps(const Mamba1Params& p, const double* dt_low, double* dt) {
  for (int d = 0; d < p.d_inner; ++d) {
    const float* w = p.dt_proj_weight + int64_t{d} * p.dt_rank;
    double acc = p.dt_proj_bias[d];
    for (int r = 0; r < p.dt_rank; ++r) acc += double{w[r]} * dt_low[r];
    dt[d] = softplus(acc);
  }
}

double skip_and_gate(const Mamba1Params& p, int d, double y, double xc, const float* z_row) {
  if (p.d_skip != nullptr) y += double{p.d_skip[d]} * xc;
  if (z_row != nullptr) y *= silu(z_row[d]);
  return y;
}

}  // namespace

std::string validate(const Mamba1Params& p) {
  return detail::first_reason(
      detail::positive("d_inner", p.d_inner), detail::positive("d_state", p.d_state),
      detail::positive("dt_rank", p.dt_rank), detail::positive("conv_kernel", p.conv_kernel),
      detail::required("conv_weight", p.conv_weight),
      detail::required("x_proj_weight", p.x_proj_weight),
      detail::required("dt_proj_weight", p.dt_proj_weight),
      detail::required("dt_proj_bias", p.dt_proj_bias), detail::required("a_log", p.a_log));
}

StateSizes mamba1_state_sizes(const Mamba1Params& p) {
  return {int64_t{p.d_inner} * (p.conv_kernel - 1), int64_t{p.d_inner} * p.d_state};
}

void mamba1(const Mamba1Params& p, int num_tokens, const float* x, const float* z, float* y,
            float* conv_state, float* ssm_state) {
  const int D = p.d_inner, N = p.d_state, R = p.dt_rank;
  std::vector<double> a(int64_t{D} * N);
  for (size_t i = 0; i < a.size(); ++i) a[i] = -std::exp(double{p.a_log[i]});
  std::vector<double> xc(D), proj(R + 2 * N), dt(D);
  const double* B = proj.data() + R;
  const double* C = proj.data() + R + N;
  for (int t = 0; t < num_tokens; ++t) {
    const int64_t row = int64_t{t} * D;
    detail::conv_step(D, p.conv_kernel, p.conv_weight, p.conv_bias, x + row, conv_state, xc.data());
    for (int d = 0; d < D; ++d) xc[d] = silu(xc[d]);
    project_x(p, xc.data(), proj.data());
    time_steps(p, proj.data(), dt.data());
    for (int d = 0; d < D; ++d) {
      float* h = ssm_state + int64_t{d} * N;
      double acc = 0.0;
      for (int n = 0; n < N; ++n) {
        const double hn = std::exp(dt[d] * a[int64_t{d} * N + n]) * h[n] + dt[d] * B[n] * xc[d];
        h[n] = static_cast<float>(hn);
        acc += C[n] * hn;
      }
      y[row + d] = static_cast<float>(skip_and_gate(p, d, acc, xc[d], z ? z + row : nullptr));
    }
  }
}

// y_t[d] = sum_n C_t[n] sum_{s<=t} exp(A[d][n] sum_{s<r<=t} dt_r[d]) dt_s[d] B_s[n] xc_s[d].
void mamba1_dense(const Mamba1Params& p, int num_tokens, const float* x, const float* z, float* y,
                  float* final_conv_state, float* final_ssm_state) {
  const int T = num_tokens, D = p.d_inner, N = p.d_state, R = p.dt_rank, P = R + 2 * N;
  std::vector<double> xc(int64_t{T} * D), proj(int64_t{T} * P), dt(int64_t{T} * D);
  detail::conv_sequence(D, p.conv_kernel, p.conv_weight, p.conv_bias, T, x, xc.data());
  for (double& v : xc) v = silu(v);
  // The projections, written apart from the recurrent path's project_x / time_steps.
  auto rms = [&](double* v, int n, const float* weight) {
    double mean_sq = 0.0;
    for (int i = 0; i < n; ++i) mean_sq += v[i] * v[i] / n;
    const double root = std::sqrt(mean_sq + p.inner_rms_eps);
    for (int i = 0; i < n; ++i) v[i] = v[i] / root * (weight != nullptr ? weight[i] : 1.0f);
  };
  for (int t = 0; t < T; ++t) {
    double* pr = proj.data() + int64_t{t} * P;
    for (int r = 0; r < P; ++r) pr[r] = 0.0;
    for (int d = 0; d < D; ++d) {
      for (int r = 0; r < P; ++r)
        pr[r] += p.x_proj_weight[int64_t{r} * D + d] * xc[int64_t{t} * D + d];
    }
    if (p.inner_rms_norm) {
      rms(pr, R, p.dt_norm_weight);
      rms(pr + R, N, p.b_norm_weight);
      rms(pr + R + N, N, p.c_norm_weight);
    }
    for (int d = 0; d < D; ++d) {
      double pre = p.dt_proj_bias[d];
      for (int r = 0; r < R; ++r) pre += p.dt_proj_weight[int64_t{d} * R + r] * pr[r];
      dt[int64_t{t} * D + d] = softplus(pre);
    }
  }
  auto at = [&](const std::vector<double>& v, int t, int i, int w) {
    return v[int64_t{t} * w + i];
  };
  std::vector<double> acc(int64_t{T} * D, 0.0), cum(T);
  for (int d = 0; d < D; ++d) {
    for (int n = 0; n < N; ++n) {
      const double A = -std::exp(double{p.a_log[int64_t{d} * N + n]});
      double run = 0.0;
      for (int t = 0; t < T; ++t) {
        run += at(dt, t, d, D) * A;
        cum[t] = run;
      }
      auto input = [&](int s) { return at(dt, s, d, D) * at(proj, s, R + n, P) * at(xc, s, d, D); };
      for (int t = 0; t < T; ++t) {
        double h = 0.0;
        for (int s = 0; s <= t; ++s) h += std::exp(cum[t] - cum[s]) * input(s);
        acc[int64_t{t} * D + d] += at(proj, t, R + N + n, P) * h;
      }
      if (final_ssm_state != nullptr) {
        double h = 0.0;
        for (int s = 0; s < T; ++s) h += std::exp(cum[T - 1] - cum[s]) * input(s);
        final_ssm_state[int64_t{d} * N + n] = static_cast<float>(h);
      }
    }
  }
  for (int t = 0; t < T; ++t) {
    const int64_t row = int64_t{t} * D;
    for (int d = 0; d < D; ++d) {
      y[row + d] =
          static_cast<float>(skip_and_gate(p, d, acc[row + d], xc[row + d], z ? z + row : nullptr));
    }
  }
  detail::conv_final_state(D, p.conv_kernel, T, x, final_conv_state);
}

}  // namespace attnkit::state
