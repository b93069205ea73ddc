// The recurrent-state references of kernels/cpu/state_update.h, part 2: gated delta net
// (Qwen3-Next), KDA (Kimi-Linear), lightning linear attention (MiniMax) and RG-LRU
// (RecurrentGemma). The same three properties per type as state_update_test.cpp, plus the
// value-head to key-head mapping and RG-LRU's position-0 reset.

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/state_update.h"
#include "state_test_support.h"

namespace attnkit::state {
namespace {

using testing::expect_chunking_neutral;
using testing::expect_matches_dense;
using testing::signed_values;
using testing::uniform_values;

// ---- gated delta rule (GDN and KDA) ----------------------------------------------------

enum class Gate { kGdn, kKda };

struct DeltaCase {
  Gate gate;
  int Hk, Hv, dk, dv, K, T;
  std::vector<float> conv_w, conv_b, a_log, dt_bias, qkv, a, g, b;
  int out_width;
  std::string name;

  DeltaCase(Gate kind, int hk, int hv, int k_dim, int v_dim, int k, int t, bool with_bias,
            uint32_t seed)
      : gate(kind), Hk(hk), Hv(hv), dk(k_dim), dv(v_dim), K(k), T(t), out_width(hv * v_dim) {
    std::mt19937 rng(seed);
    const int W = width();
    conv_w = signed_values(rng, int64_t{W} * K, 0.1f, 0.6f);
    if (with_bias) conv_b = signed_values(rng, W, 0.05f, 0.3f);
    a_log = signed_values(rng, Hv, 0.05f, 1.0f);
    dt_bias = signed_values(rng, Hv, 0.1f, 1.0f);
    qkv = signed_values(rng, int64_t{T} * W, 0.1f, 1.5f);
    a = signed_values(rng, int64_t{T} * Hv, 0.1f, 1.0f);
    g = uniform_values(rng, int64_t{T} * Hv * dk, -1.5f, -0.02f);
    b = signed_values(rng, int64_t{T} * Hv, 0.1f, 2.0f);
    name = std::string(gate == Gate::kGdn ? "GDN" : "KDA") + " Hk=" + std::to_string(Hk) +
           " Hv=" + std::to_string(Hv) + " dk=" + std::to_string(dk) + " dv=" + std::to_string(dv) +
           " K=" + std::to_string(K) + " T=" + std::to_string(T);
  }
  int width() const { return 2 * Hk * dk + Hv * dv; }
  DeltaRuleParams params() const {
    DeltaRuleParams p;
    p.num_k_heads = Hk;
    p.num_v_heads = Hv;
    p.head_k_dim = dk;
    p.head_v_dim = dv;
    p.conv_kernel = K;
    p.conv_weight = conv_w.data();
    p.conv_bias = conv_b.empty() ? nullptr : conv_b.data();
    p.a_log = a_log.data();
    p.dt_bias = dt_bias.data();
    return p;
  }
  StateSizes sizes() const { return delta_rule_state_sizes(params()); }
  void step(int t0, int n, float* out, float* conv, float* rec) const {
    const float* x = qkv.data() + int64_t{t0} * width();
    const float* bt = b.data() + int64_t{t0} * Hv;
    if (gate == Gate::kGdn) {
      gated_delta_net(params(), n, x, a.data() + int64_t{t0} * Hv, bt, out, conv, rec);
    } else {
      kimi_delta_attention(params(), n, x, g.data() + int64_t{t0} * Hv * dk, bt, out, conv, rec);
    }
  }
  void dense(float* out, float* conv, float* rec) const {
    if (gate == Gate::kGdn) {
      gated_delta_net_dense(params(), T, qkv.data(), a.data(), b.data(), out, conv, rec);
    } else {
      kimi_delta_attention_dense(params(), T, qkv.data(), g.data(), b.data(), out, conv, rec);
    }
  }
};

std::vector<DeltaCase> delta_cases(Gate gate) {
  return {DeltaCase(gate, 2, 4, 4, 3, 4, 17, false, 51),  // Hv > Hk, Qwen3-Next-like
          DeltaCase(gate, 1, 1, 3, 5, 4, 2, false, 52),   // T < K - 1
          DeltaCase(gate, 3, 3, 2, 2, 2, 12, true, 53),
          DeltaCase(gate, 1, 3, 5, 4, 3, 9, true, 54),  // odd GQA ratio
          DeltaCase(gate, 2, 6, 3, 2, 4, 1, false, 55)};
}

TEST(StateGatedDeltaNet, ChunkingDoesNotChangeOutputsOrState) {
  for (const DeltaCase& c : delta_cases(Gate::kGdn)) expect_chunking_neutral(c);
}

TEST(StateGatedDeltaNet, RecurrentMatchesDoubleRecurrenceAndFinalState) {
  for (const DeltaCase& c : delta_cases(Gate::kGdn)) expect_matches_dense(c);
}

TEST(StateKimiDeltaAttention, ChunkingDoesNotChangeOutputsOrState) {
  for (const DeltaCase& c : delta_cases(Gate::kKda)) expect_chunking_neutral(c);
}

TEST(StateKimiDeltaAttention, RecurrentMatchesDoubleRecurrenceAndFinalState) {
  for (const DeltaCase& c : delta_cases(Gate::kKda)) expect_matches_dense(c);
}

// Value head v reads key head v / (Hv / Hk), not v % Hk: Hk = 2, Hv = 4 equals Hk = 4 with
// each key head's q and k (and their conv weights) repeated for its two value heads.
TEST(StateGatedDeltaNet, ValueHeadsUseKeyHeadsByDivision) {
  for (Gate gate : {Gate::kGdn, Gate::kKda}) {
    const DeltaCase grouped(gate, 2, 4, 3, 2, 3, 8, true, 56);
    DeltaCase expanded(gate, 4, 4, 3, 2, 3, 8, true, 57);
    const int dk = 3, qk_g = 2 * dk, qk_e = 4 * dk, Wg = grouped.width(), We = expanded.width();
    std::vector<int> src(We);
    for (int part = 0; part < 2; ++part) {
      for (int h = 0; h < 4; ++h) {
        for (int i = 0; i < dk; ++i) src[part * qk_e + h * dk + i] = part * qk_g + (h / 2) * dk + i;
      }
    }
    for (int i = 0; i < 4 * 2; ++i) src[2 * qk_e + i] = 2 * qk_g + i;
    for (int c = 0; c < We; ++c) {
      for (int j = 0; j < 3; ++j) expanded.conv_w[c * 3 + j] = grouped.conv_w[src[c] * 3 + j];
      expanded.conv_b[c] = grouped.conv_b[src[c]];
      for (int t = 0; t < 8; ++t) expanded.qkv[t * We + c] = grouped.qkv[t * Wg + src[c]];
    }
    expanded.a_log = grouped.a_log;
    expanded.dt_bias = grouped.dt_bias;
    expanded.a = grouped.a;
    expanded.g = grouped.g;
    expanded.b = grouped.b;
    const auto x = testing::run_chunks(grouped, {8});
    const auto y = testing::run_chunks(expanded, {8});
    EXPECT_LE(testing::rel_err(x.out, y.out), 1e-6) << grouped.name;
    EXPECT_LE(testing::rel_err(x.rec, y.rec), 1e-6) << grouped.name;
  }
}

// The tiny delta-rule case, shared by GDN and KDA: Hk = Hv = 1, dk = 2, dv = 1, K = 1 (conv
// weight 1, no bias: every input goes through silu), T = 2; q^ = silu(q) / sqrt(|silu(q)|^2
// + 1e-6) / sqrt(2), k^ likewise without the 1/sqrt(2), beta = sigmoid(b).
//   t = 0 (S = 0):  S0 = k^0 beta0 v0;  o0 = (k^0 . q^0) beta0 v0.
//   t = 1:  S' = diag(e^g1) S0;  delta = beta1 (v1 - S'^T k^1);  S1 = S' + k^1 delta;
//           o1 = S1^T q^1.
// GDN: g = -exp(A_log) softplus(a + dt_bias), the same for both rows; KDA: g1 per row.
struct TinyDelta {
  float qkv[10] = {0.8f,  -0.4f, 0.3f, 1.1f,  1.2f,  // t = 0: q0 q1 k0 k1 v
                   -0.6f, 0.9f,  1.4f, -0.2f, -0.7f};
  float b[2] = {0.5f, -0.3f};
  float conv_w[5] = {1, 1, 1, 1, 1};

  // Expected o, S1 given the decay of each key row at t = 1.
  void expect(const float* out, const float* state, const double decay1[2]) const {
    using testing::silu;
    auto unit = [](double u0, double u1, double scale, double* r) {
      const double inv = 1.0 / std::sqrt(u0 * u0 + u1 * u1 + 1e-6) * scale;
      r[0] = u0 * inv;
      r[1] = u1 * inv;
    };
    double q[2][2], k[2][2], v[2], beta[2];
    for (int t = 0; t < 2; ++t) {
      const float* row = qkv + 5 * t;
      unit(silu(row[0]), silu(row[1]), 1.0 / std::sqrt(2.0), q[t]);
      unit(silu(row[2]), silu(row[3]), 1.0, k[t]);
      v[t] = silu(row[4]);
      beta[t] = testing::sigmoid(b[t]);
    }
    const double S0[2] = {k[0][0] * beta[0] * v[0], k[0][1] * beta[0] * v[0]};
    const double o0 = S0[0] * q[0][0] + S0[1] * q[0][1];
    const double Sd[2] = {decay1[0] * S0[0], decay1[1] * S0[1]};
    const double delta = beta[1] * (v[1] - (Sd[0] * k[1][0] + Sd[1] * k[1][1]));
    const double S1[2] = {Sd[0] + k[1][0] * delta, Sd[1] + k[1][1] * delta};
    const double o1 = S1[0] * q[1][0] + S1[1] * q[1][1];
    EXPECT_NEAR(out[0], o0, 1e-6);
    EXPECT_NEAR(out[1], o1, 1e-6);
    EXPECT_NEAR(state[0], S1[0], 1e-6);
    EXPECT_NEAR(state[1], S1[1], 1e-6);
  }
};

TEST(StateGatedDeltaNet, HandCheckedTinyCase) {
  const TinyDelta c;
  const float a_log[] = {0.3f}, dt_bias[] = {-0.2f}, a[] = {0.7f, 0.4f};
  DeltaRuleParams p;
  p.num_k_heads = p.num_v_heads = 1;
  p.head_k_dim = 2;
  p.head_v_dim = 1;
  p.conv_kernel = 1;
  p.conv_weight = c.conv_w;
  p.a_log = a_log;
  p.dt_bias = dt_bias;
  ASSERT_EQ(validate_gated_delta_net(p), "");
  float out[2], S[2] = {0, 0};
  gated_delta_net(p, 2, c.qkv, a, c.b, out, nullptr, S);
  const double g1 = -std::exp(0.3) * testing::softplus(0.4 - 0.2);
  const double decay1[2] = {std::exp(g1), std::exp(g1)};
  c.expect(out, S, decay1);
}

TEST(StateKimiDeltaAttention, HandCheckedTinyCase) {
  const TinyDelta c;
  const float g[] = {-0.1f, -0.9f, -0.5f, -1.3f};  // [t][dk]; t = 0's decay meets S = 0
  DeltaRuleParams p;
  p.num_k_heads = p.num_v_heads = 1;
  p.head_k_dim = 2;
  p.head_v_dim = 1;
  p.conv_kernel = 1;
  p.conv_weight = c.conv_w;
  ASSERT_EQ(validate_kimi_delta_attention(p), "");
  float out[2], S[2] = {0, 0};
  kimi_delta_attention(p, 2, c.qkv, g, c.b, out, nullptr, S);
  const double decay1[2] = {std::exp(-0.5), std::exp(-1.3)};
  c.expect(out, S, decay1);
}

// ---- lightning linear attention ----------------------------------------------------------

struct LinearCase {
  int H, d, T;
  std::vector<float> slope, q, k, v;
  int out_width;
  std::string name;

  LinearCase(int h, int dim, int t, uint32_t seed) : H(h), d(dim), T(t), out_width(h * dim) {
    std::mt19937 rng(seed);
    slope = uniform_values(rng, H, 0.05f, 1.0f);
    q = signed_values(rng, int64_t{T} * H * d, 0.1f, 1.0f);
    k = signed_values(rng, int64_t{T} * H * d, 0.1f, 1.0f);
    v = signed_values(rng, int64_t{T} * H * d, 0.1f, 1.0f);
    name = "H=" + std::to_string(H) + " d=" + std::to_string(d) + " T=" + std::to_string(T);
  }
  LinearAttentionParams params() const { return {H, d, slope.data()}; }
  StateSizes sizes() const { return linear_attention_state_sizes(params()); }
  void step(int t0, int n, float* out, float*, float* rec) const {
    const int64_t o = int64_t{t0} * H * d;
    linear_attention(params(), n, q.data() + o, k.data() + o, v.data() + o, out, rec);
  }
  void dense(float* out, float*, float* rec) const {
    linear_attention_dense(params(), T, q.data(), k.data(), v.data(), out, rec);
  }
};

std::vector<LinearCase> linear_cases() {
  return {LinearCase(3, 4, 23, 61), LinearCase(1, 5, 1, 62), LinearCase(2, 3, 2, 63),
          LinearCase(4, 7, 14, 64)};
}

TEST(StateLinearAttention, ChunkingDoesNotChangeOutputsOrState) {
  for (const LinearCase& c : linear_cases()) expect_chunking_neutral(c);
}

TEST(StateLinearAttention, RecurrentMatchesDecayMaskFormAndFinalState) {
  for (const LinearCase& c : linear_cases()) expect_matches_dense(c);
}

// d = 1, slope ln 2 (decay 1/2): q = [1, 2], k = [3, 1], v = [2, 4]:
//   kv0 = 3*2 = 6, o0 = 1*6 = 6;  kv1 = 6/2 + 1*4 = 7, o1 = 2*7 = 14.
// d = 2, one token, q = [1, 0], k = [1, 2], v = [3, 5]: kv = k^T v = [[3, 5], [6, 10]],
//   o = q kv = [3, 5] (the transposed kv would give [3, 6]).
TEST(StateLinearAttention, HandCheckedTinyCase) {
  const float ln2[] = {static_cast<float>(std::log(2.0))};
  const float q[] = {1, 2}, k[] = {3, 1}, v[] = {2, 4};
  float out[2], kv[1] = {0};
  linear_attention({1, 1, ln2}, 2, q, k, v, out, kv);
  EXPECT_NEAR(out[0], 6.0f, 1e-6);
  EXPECT_NEAR(out[1], 14.0f, 1e-6);
  EXPECT_NEAR(kv[0], 7.0f, 1e-6);

  const float q2[] = {1, 0}, k2[] = {1, 2}, v2[] = {3, 5};
  float out2[2], kv2[4] = {0, 0, 0, 0};
  linear_attention({1, 2, ln2}, 1, q2, k2, v2, out2, kv2);
  EXPECT_EQ(out2[0], 3.0f);
  EXPECT_EQ(out2[1], 5.0f);
  EXPECT_EQ(kv2[1], 5.0f);  // [key dim][value dim]
  EXPECT_EQ(kv2[2], 6.0f);
}

// ---- RG-LRU ------------------------------------------------------------------------------

struct RgLruCase {
  int W, H, K, T;
  std::vector<float> conv_w, conv_b, wx, bx, wa, ba, a_param, x;
  int out_width;
  std::string name;

  RgLruCase(int w, int h, int k, int t, uint32_t seed) : W(w), H(h), K(k), T(t), out_width(w) {
    std::mt19937 rng(seed);
    const int bw = W / H;
    conv_w = signed_values(rng, int64_t{W} * K, 0.1f, 0.6f);
    conv_b = signed_values(rng, W, 0.05f, 0.3f);
    wx = signed_values(rng, int64_t{H} * bw * bw, 0.1f, 0.8f);
    bx = signed_values(rng, W, 0.05f, 0.5f);
    wa = signed_values(rng, int64_t{H} * bw * bw, 0.1f, 0.8f);
    ba = signed_values(rng, W, 0.05f, 0.5f);
    a_param = signed_values(rng, W, 0.1f, 1.5f);
    x = signed_values(rng, int64_t{T} * W, 0.1f, 1.5f);
    name = "W=" + std::to_string(W) + " H=" + std::to_string(H) + " K=" + std::to_string(K) +
           " T=" + std::to_string(T);
  }
  RgLruParams params() const {
    return {W,         H,         K,         conv_w.data(), conv_b.data(),
            wx.data(), bx.data(), wa.data(), ba.data(),     a_param.data()};
  }
  StateSizes sizes() const { return rg_lru_state_sizes(params()); }
  void step(int t0, int n, float* out, float* conv, float* rec) const {
    rg_lru(params(), n, t0, x.data() + int64_t{t0} * W, out, conv, rec);
  }
  void dense(float* out, float* conv, float* rec) const {
    rg_lru_dense(params(), T, x.data(), out, conv, rec);
  }
};

std::vector<RgLruCase> rg_lru_cases() {
  return {RgLruCase(6, 2, 4, 21, 71), RgLruCase(5, 1, 4, 2, 72), RgLruCase(8, 4, 1, 13, 73),
          RgLruCase(4, 4, 3, 7, 74), RgLruCase(9, 3, 4, 1, 75)};
}

TEST(StateRgLru, ChunkingDoesNotChangeOutputsOrState) {
  for (const RgLruCase& c : rg_lru_cases()) expect_chunking_neutral(c);
}

TEST(StateRgLru, RecurrentMatchesClosedFormAndFinalState) {
  for (const RgLruCase& c : rg_lru_cases()) expect_matches_dense(c);
}

// At position 0 the previous state is ignored: a chunk starting there from a garbage state
// gives the zero-state result; the same chunk at a later position does not.
TEST(StateRgLru, PositionZeroIgnoresThePreviousState) {
  const RgLruCase c(6, 3, 3, 5, 76);
  const StateSizes s = c.sizes();
  std::vector<float> conv(s.conv_elems, 0.0f), rec(s.recurrent_elems, 0.0f), fresh(30), reused(30);
  rg_lru(c.params(), 5, 0, c.x.data(), fresh.data(), conv.data(), rec.data());
  std::vector<float> conv2(s.conv_elems, 0.0f), garbage(s.recurrent_elems, 7.5f);
  rg_lru(c.params(), 5, 0, c.x.data(), reused.data(), conv2.data(), garbage.data());
  EXPECT_EQ(fresh, reused);
  std::vector<float> conv3(s.conv_elems, 0.0f), rec3(s.recurrent_elems, 0.0f), later(30);
  rg_lru(c.params(), 5, 4, c.x.data(), later.data(), conv3.data(), rec3.data());
  EXPECT_GT(testing::rel_err(later, fresh), 1e-3);  // no reset: the multiplier applies
}

// W = 2, one block (bw = 2), K = 1: conv w [1, 1], bias [0.5, -0.5], so xc = x + bias.
// Gate weights are [in][out]: gate_x[j] = sigmoid(bx[j] + sum_i xc[i] Wx[i][j]).
// log_a = -8 gate_a softplus(a_param); a = e^log_a.
//   position 0: h0 = gate_x0 xc0 (multiplier 1, no previous state);
//   position 1: h1 = a1 h0 + sqrt(1 - a1^2) gate_x1 xc1.
TEST(StateRgLru, HandCheckedTinyCase) {
  using testing::sigmoid;
  using testing::softplus;
  const float conv_w[] = {1, 1}, conv_b[] = {0.5f, -0.5f};
  const float wx[] = {0.1f, 0.2f, 0.3f, 0.4f}, bx[] = {0.0f, 0.1f};
  const float wa[] = {-0.2f, 0.5f, 0.1f, 0.3f}, ba[] = {0.2f, -0.1f};
  const float a_param[] = {0.5f, -1.0f};
  const RgLruParams p{2, 1, 1, conv_w, conv_b, wx, bx, wa, ba, a_param};
  ASSERT_EQ(validate(p), "");
  const float x[] = {1.0f, 2.0f, -1.0f, 0.5f};
  float out[4], h[2] = {0, 0};
  rg_lru(p, 2, 0, x, out, nullptr, h);
  double h_prev[2] = {0, 0};
  for (int t = 0; t < 2; ++t) {
    const double xc[2] = {x[2 * t] + 0.5, x[2 * t + 1] - 0.5};
    for (int j = 0; j < 2; ++j) {
      const double gx = sigmoid(bx[j] + xc[0] * wx[0 * 2 + j] + xc[1] * wx[1 * 2 + j]);
      const double ga = sigmoid(ba[j] + xc[0] * wa[0 * 2 + j] + xc[1] * wa[1 * 2 + j]);
      const double a = std::exp(-8.0 * ga * softplus(a_param[j]));
      const double want = t == 0 ? gx * xc[j] : a * h_prev[j] + std::sqrt(1 - a * a) * gx * xc[j];
      EXPECT_NEAR(out[2 * t + j], want, 1e-6) << "t " << t << " j " << j;
      h_prev[j] = want;
    }
  }
  EXPECT_NEAR(h[0], h_prev[0], 1e-6);
  EXPECT_NEAR(h[1], h_prev[1], 1e-6);
}

}  // namespace
}  // namespace attnkit::state
