// The recurrent-state references of kernels/cpu/state_update.h, part 1: causal conv1d, LFM2
// short conv, Mamba1 and Mamba2. Per type: chunking is neutral (and the state matters), the
// recurrent path equals the dense form (outputs and final states), and a tiny case worked
// out by hand. The delta rule, linear attention and RG-LRU are in state_recurrent_test.cpp.

#include "kernels/cpu/state_update.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "state_test_support.h"

namespace attnkit::state {
namespace {

using testing::expect_chunking_neutral;
using testing::expect_matches_dense;
using testing::signed_values;
using testing::uniform_values;

// ---- causal conv1d ---------------------------------------------------------------------

struct ConvCase {
  int C, K, T;
  bool silu;
  std::vector<float> weight, bias, x;
  int out_width;
  std::string name;

  ConvCase(int c, int k, int t, bool with_bias, bool with_silu, uint32_t seed)
      : C(c), K(k), T(t), silu(with_silu), out_width(c) {
    std::mt19937 rng(seed);
    weight = signed_values(rng, int64_t{C} * K, 0.1f, 0.6f);
    if (with_bias) bias = signed_values(rng, C, 0.05f, 0.3f);
    x = signed_values(rng, int64_t{T} * C, 0.1f, 1.0f);
    name = "C=" + std::to_string(C) + " K=" + std::to_string(K) + " T=" + std::to_string(T) +
           (with_bias ? " bias" : "") + (silu ? " silu" : "");
  }
  CausalConvParams params() const {
    return {C, K, weight.data(), bias.empty() ? nullptr : bias.data(),
            silu ? ConvActivation::kSilu : ConvActivation::kNone};
  }
  StateSizes sizes() const { return causal_conv_state_sizes(params()); }
  void step(int t0, int n, float* out, float* conv, float*) const {
    causal_conv(params(), n, x.data() + int64_t{t0} * C, out, conv);
  }
  void dense(float* out, float* conv, float*) const {
    causal_conv_dense(params(), T, x.data(), out, conv);
  }
};

std::vector<ConvCase> conv_cases() {
  return {ConvCase(5, 4, 2, true, true, 11),                                         // T < K - 1
          ConvCase(7, 4, 23, true, false, 12),  ConvCase(3, 1, 9, false, true, 13),  // no state
          ConvCase(6, 2, 17, false, false, 14), ConvCase(1, 5, 3, true, true, 15),
          ConvCase(4, 4, 1, true, true, 16)};
}

TEST(StateCausalConv, ChunkingDoesNotChangeOutputsOrState) {
  for (const ConvCase& c : conv_cases()) expect_chunking_neutral(c);
}

TEST(StateCausalConv, RecurrentMatchesDenseAndFinalState) {
  for (const ConvCase& c : conv_cases()) expect_matches_dense(c);
}

// C = 1, K = 3, w = [1, 2, 3] (w[2] multiplies the current token), bias 0.5,
// state [10, 20] (oldest first), x = [1, 2]:
//   out0 = 1*10 + 2*20 + 3*1 + 0.5 = 53.5, out1 = 1*20 + 2*1 + 3*2 + 0.5 = 28.5, state [1, 2].
// One token (T = 1 < K - 1) from [10, 20]: out = 53.5 and the state shifts to [20, 1].
// SiLU, K = 1, w = [1], x = 0.5: silu(0.5) = 0.5 / (1 + e^-0.5) = 0.3112296656.
TEST(StateCausalConv, HandCheckedTinyCase) {
  const float w[] = {1, 2, 3}, bias[] = {0.5f};
  const CausalConvParams p{1, 3, w, bias, ConvActivation::kNone};
  EXPECT_EQ(validate(p), "");
  float state[] = {10, 20}, x[] = {1, 2}, out[2];
  causal_conv(p, 2, x, out, state);
  EXPECT_EQ(out[0], 53.5f);
  EXPECT_EQ(out[1], 28.5f);
  EXPECT_EQ(state[0], 1.0f);
  EXPECT_EQ(state[1], 2.0f);

  float state2[] = {10, 20}, one[] = {1}, out1[1];
  causal_conv(p, 1, one, out1, state2);
  EXPECT_EQ(out1[0], 53.5f);
  EXPECT_EQ(state2[0], 20.0f);
  EXPECT_EQ(state2[1], 1.0f);

  float dense_state[2];
  causal_conv_dense(p, 1, one, out1, dense_state);  // from zero: 3*1 + 0.5
  EXPECT_EQ(out1[0], 3.5f);
  EXPECT_EQ(dense_state[0], 0.0f);  // zero-padded at the front
  EXPECT_EQ(dense_state[1], 1.0f);

  const float w1[] = {1};
  const CausalConvParams ps{1, 1, w1, nullptr, ConvActivation::kSilu};
  float half[] = {0.5f}, o[1];
  causal_conv(ps, 1, half, o, nullptr);
  EXPECT_NEAR(o[0], 0.3112296656, 1e-7);
}

TEST(StateCausalConv, OutputMayAliasInput) {
  const ConvCase c(6, 4, 9, true, true, 17);
  std::vector<float> state(c.sizes().conv_elems, 0.0f), inplace = c.x, out(c.x.size());
  std::vector<float> state2 = state;
  causal_conv(c.params(), c.T, c.x.data(), out.data(), state.data());
  causal_conv(c.params(), c.T, inplace.data(), inplace.data(), state2.data());
  EXPECT_EQ(inplace, out);
  EXPECT_EQ(state2, state);
}

// ---- LFM2 short conv -------------------------------------------------------------------

struct ShortConvCase {
  int H, K, T;
  std::vector<float> weight, bias, b, c, x;
  int out_width;
  std::string name;

  ShortConvCase(int h, int k, int t, bool with_bias, uint32_t seed)
      : H(h), K(k), T(t), out_width(h) {
    std::mt19937 rng(seed);
    weight = signed_values(rng, int64_t{H} * K, 0.1f, 0.6f);
    if (with_bias) bias = signed_values(rng, H, 0.05f, 0.3f);
    b = signed_values(rng, int64_t{T} * H, 0.1f, 1.5f);
    c = signed_values(rng, int64_t{T} * H, 0.1f, 1.5f);
    x = signed_values(rng, int64_t{T} * H, 0.1f, 1.5f);
    name = "H=" + std::to_string(H) + " K=" + std::to_string(K) + " T=" + std::to_string(T);
  }
  ShortConvParams params() const {
    return {H, K, weight.data(), bias.empty() ? nullptr : bias.data()};
  }
  StateSizes sizes() const { return short_conv_state_sizes(params()); }
  void step(int t0, int n, float* out, float* conv, float*) const {
    const int64_t o = int64_t{t0} * H;
    short_conv(params(), n, b.data() + o, c.data() + o, x.data() + o, out, conv);
  }
  void dense(float* out, float* conv, float*) const {
    short_conv_dense(params(), T, b.data(), c.data(), x.data(), out, conv);
  }
};

std::vector<ShortConvCase> short_conv_cases() {
  return {ShortConvCase(6, 3, 19, false, 21), ShortConvCase(5, 4, 2, true, 22),
          ShortConvCase(3, 1, 5, false, 23), ShortConvCase(9, 3, 1, true, 24)};
}

TEST(StateShortConv, ChunkingDoesNotChangeOutputsOrState) {
  for (const ShortConvCase& c : short_conv_cases()) expect_chunking_neutral(c);
}

TEST(StateShortConv, RecurrentMatchesDenseAndFinalState) {
  for (const ShortConvCase& c : short_conv_cases()) expect_matches_dense(c);
}

// H = 1, K = 2, w = [2, 3], no bias; b = [2, 1], c = [1, -1], x = [3, 4]: b x = [6, 4];
// out0 = 1 * (2*0 + 3*6) = 18, out1 = -1 * (2*6 + 3*4) = -24; the state holds b x = [4].
TEST(StateShortConv, HandCheckedTinyCase) {
  const float w[] = {2, 3}, b[] = {2, 1}, c[] = {1, -1}, x[] = {3, 4};
  const ShortConvParams p{1, 2, w, nullptr};
  float state[] = {0}, out[2];
  short_conv(p, 2, b, c, x, out, state);
  EXPECT_EQ(out[0], 18.0f);
  EXPECT_EQ(out[1], -24.0f);
  EXPECT_EQ(state[0], 4.0f);
}

// ---- Mamba1 ----------------------------------------------------------------------------

enum class InnerNorm { kNone, kWeighted, kWeightless };

struct Mamba1Case {
  int D, N, R, K, T;
  InnerNorm norm;
  std::vector<float> conv_w, conv_b, x_proj, dt_proj, dt_bias, a_log, d_skip;
  std::vector<float> dt_norm, b_norm, c_norm, x, z;
  int out_width;
  std::string name;

  Mamba1Case(int d, int n, int r, int k, int t, InnerNorm inner, bool gate, uint32_t seed)
      : D(d), N(n), R(r), K(k), T(t), norm(inner), out_width(d) {
    std::mt19937 rng(seed);
    conv_w = signed_values(rng, int64_t{D} * K, 0.1f, 0.6f);
    conv_b = signed_values(rng, D, 0.05f, 0.3f);
    x_proj = signed_values(rng, int64_t{R + 2 * N} * D, 0.1f, 0.8f);
    dt_proj = signed_values(rng, int64_t{D} * R, 0.1f, 0.8f);
    dt_bias = signed_values(rng, D, 0.1f, 1.0f);
    a_log = signed_values(rng, int64_t{D} * N, 0.05f, 1.0f);
    d_skip = signed_values(rng, D, 0.1f, 1.0f);
    if (norm == InnerNorm::kWeighted) {
      dt_norm = uniform_values(rng, R, 0.5f, 1.5f);
      b_norm = uniform_values(rng, N, 0.5f, 1.5f);
      c_norm = uniform_values(rng, N, 0.5f, 1.5f);
    }
    x = signed_values(rng, int64_t{T} * D, 0.1f, 1.5f);
    if (gate) z = signed_values(rng, int64_t{T} * D, 0.1f, 1.5f);
    name = "D=" + std::to_string(D) + " N=" + std::to_string(N) + " R=" + std::to_string(R) +
           " K=" + std::to_string(K) + " T=" + std::to_string(T) +
           (norm == InnerNorm::kNone ? "" : " inner-norm") + (gate ? "" : " no-gate");
  }
  static const float* ptr(const std::vector<float>& v) { return v.empty() ? nullptr : v.data(); }
  Mamba1Params params() const {
    Mamba1Params p;
    p.d_inner = D;
    p.d_state = N;
    p.dt_rank = R;
    p.conv_kernel = K;
    p.conv_weight = conv_w.data();
    p.conv_bias = conv_b.data();
    p.x_proj_weight = x_proj.data();
    p.dt_proj_weight = dt_proj.data();
    p.dt_proj_bias = dt_bias.data();
    p.a_log = a_log.data();
    p.d_skip = d_skip.data();
    p.inner_rms_norm = norm != InnerNorm::kNone;
    p.dt_norm_weight = ptr(dt_norm);
    p.b_norm_weight = ptr(b_norm);
    p.c_norm_weight = ptr(c_norm);
    return p;
  }
  StateSizes sizes() const { return mamba1_state_sizes(params()); }
  void step(int t0, int n, float* out, float* conv, float* rec) const {
    const int64_t o = int64_t{t0} * D;
    mamba1(params(), n, x.data() + o, z.empty() ? nullptr : z.data() + o, out, conv, rec);
  }
  void dense(float* out, float* conv, float* rec) const {
    mamba1_dense(params(), T, x.data(), ptr(z), out, conv, rec);
  }
};

std::vector<Mamba1Case> mamba1_cases() {
  return {Mamba1Case(6, 4, 2, 4, 21, InnerNorm::kNone, true, 31),
          Mamba1Case(5, 3, 1, 3, 2, InnerNorm::kNone, true, 32),         // T < K - 1
          Mamba1Case(4, 5, 3, 4, 15, InnerNorm::kWeighted, true, 33),    // Jamba
          Mamba1Case(7, 2, 2, 2, 11, InnerNorm::kWeightless, true, 34),  // Falcon-Mamba
          Mamba1Case(3, 4, 1, 1, 9, InnerNorm::kNone, false, 35)};
}

TEST(StateMamba1, ChunkingDoesNotChangeOutputsOrState) {
  for (const Mamba1Case& c : mamba1_cases()) expect_chunking_neutral(c);
}

TEST(StateMamba1, RecurrentMatchesQuadraticFormAndFinalState) {
  for (const Mamba1Case& c : mamba1_cases()) expect_matches_dense(c);
}

// D = N = R = 1, K = 2: conv w = [0.5, 1], bias 0.25; x = [1, 2] -> pre-activation
// [0*0.5 + 1 + 0.25, 1*0.5 + 2 + 0.25] = [1.25, 2.75], xc = silu of that.
// x_proj rows [dt 0.5, B 2, C -1]: dt_low = 0.5 xc, B = 2 xc, C = -xc.
// dt_proj w 1, bias -0.5: dt = softplus(0.5 xc - 0.5). A_log 0: A = -1. Dskip 0.5, z = [1, -1].
// h0 = dt0 B0 xc0;             y0 = (C0 h0 + 0.5 xc0) silu(1)
// h1 = e^-dt1 h0 + dt1 B1 xc1; y1 = (C1 h1 + 0.5 xc1) silu(-1)
// (numerically xc = [0.971625, 2.584762], dt = [0.686079, 1.165850], h = [1.295391,
// 15.981789], y = [-0.564978, 10.762157]).
TEST(StateMamba1, HandCheckedTinyCase) {
  using testing::silu;
  using testing::softplus;
  const float conv_w[] = {0.5f, 1.0f}, conv_b[] = {0.25f}, x_proj[] = {0.5f, 2.0f, -1.0f};
  const float dt_w[] = {1.0f}, dt_b[] = {-0.5f}, a_log[] = {0.0f}, d_skip[] = {0.5f};
  Mamba1Params p;
  p.d_inner = p.d_state = p.dt_rank = 1;
  p.conv_kernel = 2;
  p.conv_weight = conv_w;
  p.conv_bias = conv_b;
  p.x_proj_weight = x_proj;
  p.dt_proj_weight = dt_w;
  p.dt_proj_bias = dt_b;
  p.a_log = a_log;
  p.d_skip = d_skip;
  ASSERT_EQ(validate(p), "");
  const float x[] = {1, 2}, z[] = {1, -1};
  float y[2], conv[1] = {0}, h[1] = {0};
  mamba1(p, 2, x, z, y, conv, h);

  const double xc0 = silu(1.25), xc1 = silu(2.75);
  const double dt0 = softplus(0.5 * xc0 - 0.5), dt1 = softplus(0.5 * xc1 - 0.5);
  const double h0 = dt0 * (2 * xc0) * xc0;
  const double h1 = std::exp(-dt1) * h0 + dt1 * (2 * xc1) * xc1;
  const double y0 = (-xc0 * h0 + 0.5 * xc0) * silu(1.0);
  const double y1 = (-xc1 * h1 + 0.5 * xc1) * silu(-1.0);
  EXPECT_NEAR(y[0], y0, 1e-6 * std::abs(y0));
  EXPECT_NEAR(y[1], y1, 1e-6 * std::abs(y1));
  EXPECT_NEAR(h[0], h1, 1e-6 * std::abs(h1));
  EXPECT_EQ(conv[0], 2.0f);
  EXPECT_NEAR(y[1], 10.762157, 1e-5);  // the numbers in the comment
  EXPECT_NEAR(y[0], -0.564978, 1e-6);
}

// The inner norms (Jamba's weighted dt/B/C layernorms), D = R = 1, N = 2, K = 1 (conv w 1, no
// bias), one token from zero: xc = silu(0.8); proj = x_proj xc = [0.5, 1, -2, 3, 0.25] xc;
// each part becomes u / sqrt(mean(u^2) + 1e-6) * weight (dt weight 1.5, B [2, 0.5],
// C [1, 3]); dt = softplus(0.7 dt_low + 0.1); A = -1 acts on h = 0, so
// h[n] = dt B[n] xc and y = sum_n C[n] h[n] + 0.5 xc (no z gate).
TEST(StateMamba1, InnerRmsNormsHandChecked) {
  using testing::silu;
  using testing::softplus;
  const float conv_w[] = {1}, x_proj[] = {0.5f, 1.0f, -2.0f, 3.0f, 0.25f};
  const float dt_w[] = {0.7f}, dt_b[] = {0.1f}, a_log[] = {0, 0}, d_skip[] = {0.5f};
  const float dt_norm[] = {1.5f}, b_norm[] = {2.0f, 0.5f}, c_norm[] = {1.0f, 3.0f};
  Mamba1Params p;
  p.d_inner = p.dt_rank = 1;
  p.d_state = 2;
  p.conv_kernel = 1;
  p.conv_weight = conv_w;
  p.x_proj_weight = x_proj;
  p.dt_proj_weight = dt_w;
  p.dt_proj_bias = dt_b;
  p.a_log = a_log;
  p.d_skip = d_skip;
  p.inner_rms_norm = true;
  p.dt_norm_weight = dt_norm;
  p.b_norm_weight = b_norm;
  p.c_norm_weight = c_norm;
  const float x[] = {0.8f};
  float y[1], h[2] = {0, 0};
  mamba1(p, 1, x, nullptr, y, nullptr, h);
  const double xc = silu(0.8);
  auto norm2 = [](double u0, double u1, const float* w, double* out) {
    const double r = std::sqrt((u0 * u0 + u1 * u1) / 2 + 1e-6);
    out[0] = u0 / r * w[0];
    out[1] = u1 / r * w[1];
  };
  const double dt_low = 0.5 * xc / std::sqrt(0.25 * xc * xc + 1e-6) * 1.5;
  double B[2], C[2];
  norm2(1.0 * xc, -2.0 * xc, b_norm, B);
  norm2(3.0 * xc, 0.25 * xc, c_norm, C);
  const double dt = softplus(0.7 * dt_low + 0.1);
  const double h0 = dt * B[0] * xc, h1 = dt * B[1] * xc;
  EXPECT_NEAR(h[0], h0, 1e-6);
  EXPECT_NEAR(h[1], h1, 1e-6);
  EXPECT_NEAR(y[0], C[0] * h0 + C[1] * h1 + 0.5 * xc, 1e-6);
}

// ---- Mamba2 ----------------------------------------------------------------------------

struct Mamba2Case {
  int H, P, G, N, K, T;
  float dt_min = 0.0f, dt_max = std::numeric_limits<float>::infinity();
  std::vector<float> conv_w, conv_b, dt_bias, a_log, d_skip, xbc, dt;
  int out_width;
  std::string name;

  Mamba2Case(int h, int p, int g, int n, int k, int t, uint32_t seed, bool with_skip = true)
      : H(h), P(p), G(g), N(n), K(k), T(t), out_width(h * p) {
    std::mt19937 rng(seed);
    const int W = H * P + 2 * G * N;
    conv_w = signed_values(rng, int64_t{W} * K, 0.1f, 0.6f);
    conv_b = signed_values(rng, W, 0.05f, 0.3f);
    dt_bias = signed_values(rng, H, 0.1f, 1.0f);
    a_log = signed_values(rng, H, 0.05f, 1.0f);
    if (with_skip) d_skip = signed_values(rng, H, 0.1f, 1.0f);
    xbc = signed_values(rng, int64_t{T} * W, 0.1f, 1.5f);
    dt = signed_values(rng, int64_t{T} * H, 0.1f, 1.0f);
    name = "H=" + std::to_string(H) + " P=" + std::to_string(P) + " G=" + std::to_string(G) +
           " N=" + std::to_string(N) + " K=" + std::to_string(K) + " T=" + std::to_string(T);
  }
  Mamba2Params params() const {
    Mamba2Params p;
    p.num_heads = H;
    p.head_dim = P;
    p.n_groups = G;
    p.d_state = N;
    p.conv_kernel = K;
    p.conv_weight = conv_w.data();
    p.conv_bias = conv_b.data();
    p.dt_bias = dt_bias.data();
    p.a_log = a_log.data();
    p.d_skip = d_skip.empty() ? nullptr : d_skip.data();
    p.dt_min = dt_min;
    p.dt_max = dt_max;
    return p;
  }
  StateSizes sizes() const { return mamba2_state_sizes(params()); }
  void step(int t0, int n, float* out, float* conv, float* rec) const {
    const int W = H * P + 2 * G * N;
    mamba2(params(), n, xbc.data() + int64_t{t0} * W, dt.data() + int64_t{t0} * H, out, conv, rec);
  }
  void dense(float* out, float* conv, float* rec) const {
    mamba2_dense(params(), T, xbc.data(), dt.data(), out, conv, rec);
  }
};

std::vector<Mamba2Case> mamba2_cases() {
  std::vector<Mamba2Case> cases = {Mamba2Case(4, 3, 2, 5, 4, 19, 41),  // G > 1
                                   Mamba2Case(3, 2, 1, 4, 4, 2, 42),   // T < K - 1
                                   Mamba2Case(6, 1, 3, 2, 2, 13, 43),
                                   Mamba2Case(2, 5, 2, 3, 3, 11, 44, /*with_skip=*/false),
                                   Mamba2Case(8, 2, 2, 3, 4, 1, 45)};
  Mamba2Case clamped(3, 4, 3, 2, 4, 17, 46);
  clamped.dt_min = 0.4f;  // HF's time_step_limit: both ends are reached by these inputs
  clamped.dt_max = 0.9f;
  cases.push_back(clamped);
  return cases;
}

TEST(StateMamba2, ChunkingDoesNotChangeOutputsOrState) {
  for (const Mamba2Case& c : mamba2_cases()) expect_chunking_neutral(c);
}

TEST(StateMamba2, RecurrentMatchesSsdQuadraticFormAndFinalState) {
  for (const Mamba2Case& c : mamba2_cases()) expect_matches_dense(c);
}

// dt_min = dt_max = 0.5 pins every time step: the result equals running with dt_raw = 0 and
// dt_bias = log(e^0.5 - 1), i.e. softplus = 0.5, and no clamp.
TEST(StateMamba2, DtClampBoundsTheTimeStep) {
  Mamba2Case clamped(4, 2, 2, 3, 3, 10, 49);
  clamped.dt_min = clamped.dt_max = 0.5f;
  Mamba2Case pinned(4, 2, 2, 3, 3, 10, 49);
  std::fill(pinned.dt.begin(), pinned.dt.end(), 0.0f);
  std::fill(pinned.dt_bias.begin(), pinned.dt_bias.end(),
            static_cast<float>(std::log(std::expm1(0.5))));
  const auto a = testing::run_chunks(clamped, {3, 7});
  const auto b = testing::run_chunks(pinned, {10});
  EXPECT_LE(testing::rel_err(a.out, b.out), 1e-6);
  EXPECT_LE(testing::rel_err(a.rec, b.rec), 1e-6);
  const auto d = testing::run_dense(clamped);
  EXPECT_LE(testing::rel_err(d.out, b.out), 1e-6);
}

// Head h reads group h / (H / G), not h % G: G = 2, H = 4 equals G = 4 with B and C of each
// group repeated for its two heads (HF's repeat_interleave), conv weights repeated with them.
TEST(StateMamba2, HeadsUseGroupsByDivision) {
  const Mamba2Case grouped(4, 3, 2, 3, 3, 9, 47);
  Mamba2Case expanded(4, 3, 4, 3, 3, 9, 48);
  expanded.conv_b = {};  // rebuilt below from the grouped case
  const int D = 12, N = 3, K = 3, Wg = D + 2 * 2 * N, We = D + 2 * 4 * N;
  // Channel map of the expanded conv input onto the grouped one.
  std::vector<int> src(We);
  for (int i = 0; i < D; ++i) src[i] = i;
  for (int part = 0; part < 2; ++part) {
    for (int g = 0; g < 4; ++g) {
      for (int n = 0; n < N; ++n)
        src[D + part * 4 * N + g * N + n] = D + part * 2 * N + (g / 2) * N + n;
    }
  }
  expanded.conv_w.assign(int64_t{We} * K, 0.0f);
  expanded.conv_b.assign(We, 0.0f);
  expanded.xbc.assign(int64_t{grouped.T} * We, 0.0f);
  for (int c = 0; c < We; ++c) {
    for (int j = 0; j < K; ++j) expanded.conv_w[c * K + j] = grouped.conv_w[src[c] * K + j];
    expanded.conv_b[c] = grouped.conv_b[src[c]];
    for (int t = 0; t < grouped.T; ++t) expanded.xbc[t * We + c] = grouped.xbc[t * Wg + src[c]];
  }
  expanded.dt_bias = grouped.dt_bias;
  expanded.a_log = grouped.a_log;
  expanded.d_skip = grouped.d_skip;
  expanded.dt = grouped.dt;
  const auto a = testing::run_chunks(grouped, {grouped.T});
  const auto b = testing::run_chunks(expanded, {expanded.T});
  EXPECT_LE(testing::rel_err(a.out, b.out), 1e-6);
  EXPECT_LE(testing::rel_err(a.rec, b.rec), 1e-6);
}

// H = 4, G = 2, P = N = 1, K = 1 (conv w 1, no bias: xc = silu(xbc)), T = 2.
// xbc row = [x0..x3 | B0 B1 | C0 C1]; heads 0, 1 use group 0 and heads 2, 3 group 1.
// dt_raw 0 and dt_bias [0, 0, 0, 1]: dt = ln 2 (decay e^-dt = 1/2) except head 3,
// dt = softplus(1). A_log 0 (A = -1), Dskip [0.5, -1, 0.25, 2].
// s0 = dt B0[g] x0[h]; s1 = e^-dt s0 + dt B1[g] x1[h]; y_t = C_t[g] s_t + Dskip x_t.
TEST(StateMamba2, HandCheckedTinyCase) {
  using testing::silu;
  const float conv_w[] = {1, 1, 1, 1, 1, 1, 1, 1};
  const float dt_bias[] = {0, 0, 0, 1}, a_log[] = {0, 0, 0, 0}, d_skip[] = {0.5f, -1, 0.25f, 2};
  Mamba2Params p;
  p.num_heads = 4;
  p.head_dim = 1;
  p.n_groups = 2;
  p.d_state = 1;
  p.conv_kernel = 1;
  p.conv_weight = conv_w;
  p.dt_bias = dt_bias;
  p.a_log = a_log;
  p.d_skip = d_skip;
  ASSERT_EQ(validate(p), "");
  const float xbc[] = {0.5f, -1.0f, 1.5f,  0.25f, 1.0f,  -0.5f, 2.0f, 0.75f,   // t = 0
                       1.0f, 0.5f,  -2.0f, 1.25f, -1.5f, 0.5f,  1.0f, -1.0f};  // t = 1
  const float dt[] = {0, 0, 0, 0, 0, 0, 0, 0};
  float y[8], conv[1], s[4] = {0, 0, 0, 0};
  mamba2(p, 2, xbc, dt, y, conv, s);
  const int group[] = {0, 0, 1, 1};
  for (int h = 0; h < 4; ++h) {
    const double dth = h == 3 ? std::log1p(std::exp(1.0)) : std::log(2.0);
    const int g = group[h];
    const double x0 = silu(xbc[h]), x1 = silu(xbc[8 + h]);
    const double s0 = dth * silu(xbc[4 + g]) * x0;
    const double s1 = std::exp(-dth) * s0 + dth * silu(xbc[8 + 4 + g]) * x1;
    const double y0 = silu(xbc[6 + g]) * s0 + d_skip[h] * x0;
    const double y1 = silu(xbc[8 + 6 + g]) * s1 + d_skip[h] * x1;
    EXPECT_NEAR(y[h], y0, 1e-6) << "head " << h;
    EXPECT_NEAR(y[4 + h], y1, 1e-6) << "head " << h;
    EXPECT_NEAR(s[h], s1, 1e-6) << "head " << h;
  }
}

// ---- validation and sizes --------------------------------------------------------------

TEST(StateSizes, CountConvAndRecurrentFloats) {
  const float w = 1;
  EXPECT_EQ(causal_conv_state_sizes({7, 4, &w, nullptr, ConvActivation::kNone}).conv_elems, 21);
  Mamba1Params m1;
  m1.d_inner = 8;
  m1.d_state = 16;
  m1.conv_kernel = 4;
  EXPECT_EQ(mamba1_state_sizes(m1).conv_elems, 24);
  EXPECT_EQ(mamba1_state_sizes(m1).recurrent_elems, 128);
  Mamba2Params m2;
  m2.num_heads = 4;
  m2.head_dim = 3;
  m2.n_groups = 2;
  m2.d_state = 5;
  m2.conv_kernel = 4;
  EXPECT_EQ(mamba2_state_sizes(m2).conv_elems, (12 + 20) * 3);
  EXPECT_EQ(mamba2_state_sizes(m2).recurrent_elems, 60);
  DeltaRuleParams d;
  d.num_k_heads = 2;
  d.num_v_heads = 4;
  d.head_k_dim = 8;
  d.head_v_dim = 6;
  d.conv_kernel = 4;
  EXPECT_EQ(delta_rule_state_sizes(d).conv_elems, (32 + 24) * 3);
  EXPECT_EQ(delta_rule_state_sizes(d).recurrent_elems, 4 * 8 * 6);
  EXPECT_EQ(linear_attention_state_sizes({3, 4, &w}).recurrent_elems, 48);
  EXPECT_EQ(linear_attention_state_sizes({3, 4, &w}).conv_elems, 0);
  RgLruParams r;
  r.width = 10;
  r.num_blocks = 2;
  r.conv_kernel = 4;
  EXPECT_EQ(rg_lru_state_sizes(r).conv_elems, 30);
  EXPECT_EQ(rg_lru_state_sizes(r).recurrent_elems, 10);
}

TEST(StateValidate, NamesTheBadValue) {
  const float w = 1;
  EXPECT_NE(validate(CausalConvParams{0, 4, &w, nullptr, ConvActivation::kNone}).find("channels"),
            std::string::npos);
  EXPECT_NE(
      validate(CausalConvParams{4, 2, nullptr, nullptr, ConvActivation::kNone}).find("weight"),
      std::string::npos);
  Mamba2Params m2;
  m2.num_heads = 6;
  m2.head_dim = 2;
  m2.n_groups = 4;
  m2.d_state = 3;
  m2.conv_kernel = 4;
  m2.conv_weight = m2.dt_bias = m2.a_log = &w;
  EXPECT_NE(validate(m2).find("n_groups (4) must divide num_heads (6)"), std::string::npos);
  m2.n_groups = 3;
  EXPECT_EQ(validate(m2), "");
  DeltaRuleParams d;
  d.num_k_heads = 3;
  d.num_v_heads = 4;
  d.head_k_dim = d.head_v_dim = 2;
  d.conv_kernel = 2;
  d.conv_weight = &w;
  EXPECT_NE(validate_kimi_delta_attention(d).find("multiple of num_k_heads"), std::string::npos);
  d.num_v_heads = 6;
  EXPECT_EQ(validate_kimi_delta_attention(d), "");
  EXPECT_NE(validate_gated_delta_net(d).find("a_log"), std::string::npos);
  RgLruParams r;
  r.width = 10;
  r.num_blocks = 3;
  r.conv_kernel = 4;
  r.conv_weight = r.input_gate_weight = r.input_gate_bias = &w;
  r.a_gate_weight = r.a_gate_bias = r.a_param = &w;
  EXPECT_NE(validate(r).find("num_blocks (3) must divide width (10)"), std::string::npos);
}

}  // namespace
}  // namespace attnkit::state
