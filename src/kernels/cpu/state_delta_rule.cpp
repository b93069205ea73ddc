// Gated delta rule (state_update.h, part 4): Qwen3-Next GDN (a scalar decay per value head)
// and Kimi-Linear KDA (a decay per key channel), recurrent step and double recurrence.

#include <cmath>
#include <vector>

#include "kernels/cpu/state_common.h"
#include "kernels/cpu/state_update.h"

namespace attnkit::state {

namespace {

struct Dims {
  int Hk, Hv, dk, dv;
  int W;      // conv width 2 Hk dk + Hv dv: [q | k | v]
  int ratio;  // value heads per key head
  int64_t k_offset, v_offset;
};

Dims dims_of(const DeltaRuleParams& p) {
  const int qk = p.num_k_heads * p.head_k_dim;
  return {p.num_k_heads,
          p.num_v_heads,
          p.head_k_dim,
          p.head_v_dim,
          2 * qk + p.num_v_heads * p.head_v_dim,
          p.num_v_heads / p.num_k_heads,
          qk,
          2 * int64_t{qk}};
}

// GDN's log decay of value head h at one token: -exp(A_log) softplus(a + dt_bias).
double gdn_log_decay(const DeltaRuleParams& p, int h, float a) {
  return -std::exp(double{p.a_log[h]}) * detail::softplus(double{a} + p.dt_bias[h]);
}

// After the conv and SiLU: q and k of each key head scaled by rsqrt(sum v^2 + eps), q also
// by dk^-1/2 (FLA's l2norm, as Qwen3-Next's use_qk_l2norm_in_kernel).
void normalize_qk(const Dims& m, double eps, double* xc) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(m.dk));
  for (int part = 0; part < 2; ++part) {
    for (int h = 0; h < m.Hk; ++h) {
      double* v = xc + part * m.k_offset + int64_t{h} * m.dk;
      double ss = 0.0;
      for (int i = 0; i < m.dk; ++i) ss += v[i] * v[i];
      const double f = (part == 0 ? scale : 1.0) / std::sqrt(ss + eps);
      for (int i = 0; i < m.dk; ++i) v[i] *= f;
    }
  }
}

// One token of one value head on its float32 state S [dk][dv], in place:
// S' = diag(decay) S; S = S' + k (x) beta (v - S'^T k); o = S^T q.
void delta_step(const Dims& m, const double* q, const double* k, const double* v,
                const double* decay, double beta, float* S, double* delta, double* o) {
  for (int j = 0; j < m.dv; ++j) delta[j] = 0.0;
  for (int i = 0; i < m.dk; ++i) {
    const float* row = S + int64_t{i} * m.dv;
    for (int j = 0; j < m.dv; ++j) delta[j] += decay[i] * row[j] * k[i];
  }
  for (int j = 0; j < m.dv; ++j) {
    delta[j] = beta * (v[j] - delta[j]);
    o[j] = 0.0;
  }
  for (int i = 0; i < m.dk; ++i) {
    float* row = S + int64_t{i} * m.dv;
    for (int j = 0; j < m.dv; ++j) {
      const double s = decay[i] * row[j] + k[i] * delta[j];
      row[j] = static_cast<float>(s);
      o[j] += s * q[i];
    }
  }
}

// log_decay(t, h, out[dk]) writes value head h's log decay per key channel at token t.
template <class LogDecay>
void delta_rule(const DeltaRuleParams& p, int num_tokens, const float* qkv, const float* b,
                float* out, float* conv_state, float* recurrent_state, LogDecay log_decay) {
  const Dims m = dims_of(p);
  std::vector<double> xc(m.W), decay(m.dk), delta(m.dv), o(m.dv);
  for (int t = 0; t < num_tokens; ++t) {
    detail::conv_step(m.W, p.conv_kernel, p.conv_weight, p.conv_bias, qkv + int64_t{t} * m.W,
                      conv_state, xc.data());
    for (double& v : xc) v = detail::silu(v);
    normalize_qk(m, p.l2_eps, xc.data());
    for (int h = 0; h < m.Hv; ++h) {
      const int kh = h / m.ratio;
      const double* q = xc.data() + int64_t{kh} * m.dk;
      const double* k = xc.data() + m.k_offset + int64_t{kh} * m.dk;
      const double* v = xc.data() + m.v_offset + int64_t{h} * m.dv;
      log_decay(t, h, decay.data());
      for (double& d : decay) d = std::exp(d);
      const double beta = detail::sigmoid(b[int64_t{t} * m.Hv + h]);
      delta_step(m, q, k, v, decay.data(), beta, recurrent_state + int64_t{h} * m.dk * m.dv,
                 delta.data(), o.data());
      float* ot = out + (int64_t{t} * m.Hv + h) * m.dv;
      for (int j = 0; j < m.dv; ++j) ot[j] = static_cast<float>(o[j]);
    }
  }
}

// The same math as a double recurrence from zero, in HF's order (decay the state, read
// kv_mem, write the delta, read the output), over a conv computed without a state.
template <class LogDecay>
void delta_rule_dense(const DeltaRuleParams& p, int num_tokens, const float* qkv, const float* b,
                      float* out, float* final_conv_state, float* final_recurrent_state,
                      LogDecay log_decay) {
  const Dims m = dims_of(p);
  const int T = num_tokens;
  std::vector<double> xc(int64_t{T} * m.W), S(int64_t{m.Hv} * m.dk * m.dv, 0.0);
  std::vector<double> g(m.dk), kv_mem(m.dv);
  detail::conv_sequence(m.W, p.conv_kernel, p.conv_weight, p.conv_bias, T, qkv, xc.data());
  for (double& v : xc) v = detail::silu(v);
  for (int t = 0; t < T; ++t) {
    double* row = xc.data() + int64_t{t} * m.W;
    for (int part = 0; part < 2; ++part) {
      for (int h = 0; h < m.Hk; ++h) {
        double* v = row + part * m.k_offset + int64_t{h} * m.dk;
        double ss = 0.0;
        for (int i = 0; i < m.dk; ++i) ss += v[i] * v[i];
        const double inv = 1.0 / std::sqrt(ss + p.l2_eps);
        for (int i = 0; i < m.dk; ++i) v[i] *= inv;
        if (part == 0) {
          for (int i = 0; i < m.dk; ++i) v[i] /= std::sqrt(static_cast<double>(m.dk));
        }
      }
    }
    for (int h = 0; h < m.Hv; ++h) {
      const double* q = row + int64_t{h / m.ratio} * m.dk;
      const double* k = row + m.k_offset + int64_t{h / m.ratio} * m.dk;
      const double* v = row + m.v_offset + int64_t{h} * m.dv;
      double* s = S.data() + int64_t{h} * m.dk * m.dv;
      const double beta = 1.0 / (1.0 + std::exp(-double{b[int64_t{t} * m.Hv + h]}));
      log_decay(t, h, g.data());
      for (int i = 0; i < m.dk; ++i) {
        for (int j = 0; j < m.dv; ++j) s[i * m.dv + j] *= std::exp(g[i]);
      }
      for (int j = 0; j < m.dv; ++j) {
        kv_mem[j] = 0.0;
        for (int i = 0; i < m.dk; ++i) kv_mem[j] += s[i * m.dv + j] * k[i];
      }
      for (int i = 0; i < m.dk; ++i) {
        for (int j = 0; j < m.dv; ++j) s[i * m.dv + j] += k[i] * (beta * (v[j] - kv_mem[j]));
      }
      for (int j = 0; j < m.dv; ++j) {
        double o = 0.0;
        for (int i = 0; i < m.dk; ++i) o += s[i * m.dv + j] * q[i];
        out[(int64_t{t} * m.Hv + h) * m.dv + j] = static_cast<float>(o);
      }
    }
  }
  if (final_recurrent_state != nullptr) {
    for (size_t i = 0; i < S.size(); ++i) final_recurrent_state[i] = static_cast<float>(S[i]);
  }
  detail::conv_final_state(m.W, p.conv_kernel, T, qkv, final_conv_state);
}

std::string validate_common(const DeltaRuleParams& p) {
  std::string reason = detail::first_reason(
      detail::positive("num_k_heads", p.num_k_heads),
      detail::positive("num_v_heads", p.num_v_heads), detail::positive("head_k_dim", p.head_k_dim),
      detail::positive("head_v_dim", p.head_v_dim), detail::positive("conv_kernel", p.conv_kernel),
      detail::required("conv_weight", p.conv_weight));
  if (reason.empty() && p.num_v_heads % p.num_k_heads != 0) {
    reason = "num_v_heads (" + std::to_string(p.num_v_heads) +
             ") must be a multiple of num_k_heads (" + std::to_string(p.num_k_heads) + ")";
  }
  if (reason.empty() && !(p.l2_eps >= 0.0f)) reason = "l2_eps must be >= 0";
  return reason;
}

}  // namespace

std::string validate_gated_delta_net(const DeltaRuleParams& p) {
  return detail::first_reason(validate_common(p), detail::required("a_log", p.a_log),
                              detail::required("dt_bias", p.dt_bias));
}

std::string validate_kimi_delta_attention(const DeltaRuleParams& p) { return validate_common(p); }

StateSizes delta_rule_state_sizes(const DeltaRuleParams& p) {
  const Dims m = dims_of(p);
  return {int64_t{m.W} * (p.conv_kernel - 1), int64_t{m.Hv} * m.dk * m.dv};
}

void gated_delta_net(const DeltaRuleParams& p, int num_tokens, const float* qkv, const float* a,
                     const float* b, float* out, float* conv_state, float* recurrent_state) {
  const int Hv = p.num_v_heads, dk = p.head_k_dim;
  delta_rule(p, num_tokens, qkv, b, out, conv_state, recurrent_state, [&](int t, int h, double* g) {
    const double lg = gdn_log_decay(p, h, a[int64_t{t} * Hv + h]);
    for (int i = 0; i < dk; ++i) g[i] = lg;
  });
}

void gated_delta_net_dense(const DeltaRuleParams& p, int num_tokens, const float* qkv,
                           const float* a, const float* b, float* out, float* final_conv_state,
                           float* final_recurrent_state) {
  const int Hv = p.num_v_heads, dk = p.head_k_dim;
  delta_rule_dense(p, num_tokens, qkv, b, out, final_conv_state, final_recurrent_state,
                   [&](int t, int h, double* g) {
                     const double lg = gdn_log_decay(p, h, a[int64_t{t} * Hv + h]);
                     for (int i = 0; i < dk; ++i) g[i] = lg;
                   });
}

void kimi_delta_attention(const DeltaRuleParams& p, int num_tokens, const float* qkv,
                          const float* g, const float* b, float* out, float* conv_state,
                          float* recurrent_state) {
  const int Hv = p.num_v_heads, dk = p.head_k_dim;
  delta_rule(p, num_tokens, qkv, b, out, conv_state, recurrent_state,
             [&](int t, int h, double* lg) {
               const float* src = g + (int64_t{t} * Hv + h) * dk;
               for (int i = 0; i < dk; ++i) lg[i] = src[i];
             });
}

void kimi_delta_attention_dense(const DeltaRuleParams& p, int num_tokens, const float* qkv,
                                const float* g, const float* b, float* out, float* final_conv_state,
                                float* final_recurrent_state) {
  const int Hv = p.num_v_heads, dk = p.head_k_dim;
  delta_rule_dense(p, num_tokens, qkv, b, out, final_conv_state, final_recurrent_state,
                   [&](int t, int h, double* lg) {
                     const float* src = g + (int64_t{t} * Hv + h) * dk;
                     for (int i = 0; i < dk; ++i) lg[i] = src[i];
                   });
}

}  // namespace attnkit::state
