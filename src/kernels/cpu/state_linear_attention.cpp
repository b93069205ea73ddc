// Linear attention with per-head exponential decay, MiniMax lightning attention
// (state_update.h, part 5): the recurrent step and the quadratic decay-mask form.

#include <cmath>
#include <vector>

#include "kernels/cpu/state_common.h"
#include "kernels/cpu/state_update.h"

namespace attnkit::state {

std::string validate(const LinearAttentionParams& p) {
  return detail::first_reason(detail::positive("num_heads", p.num_heads),
                              detail::positive("head_dim", p.head_dim),
                              detail::required("slope", p.slope));
}

StateSizes linear_attention_state_sizes(const LinearAttentionParams& p) {
  return {0, int64_t{p.num_heads} * p.head_dim * p.head_dim};
}

void linear_attention(const LinearAttentionParams& p, int num_tokens, const float* q,
                      const float* k, const float* v, float* out, float* recurrent_state) {
  const int H = p.num_heads, d = p.head_dim;
  std::vector<double> o(d);
  for (int h = 0; h < H; ++h) {
    const double ratio = std::exp(-double{p.slope[h]});
    float* kv = recurrent_state + int64_t{h} * d * d;
    for (int t = 0; t < num_tokens; ++t) {
      const int64_t row = (int64_t{t} * H + h) * d;
      for (int j = 0; j < d; ++j) o[j] = 0.0;
      // kv[i][j] = ratio kv[i][j] + k[i] v[j]; o[j] = sum_i q[i] kv[i][j] (the new kv).
      for (int i = 0; i < d; ++i) {
        float* kv_row = kv + int64_t{i} * d;
        for (int j = 0; j < d; ++j) {
          const double s = ratio * kv_row[j] + double{k[row + i]} * v[row + j];
          kv_row[j] = static_cast<float>(s);
          o[j] += double{q[row + i]} * s;
        }
      }
      for (int j = 0; j < d; ++j) out[row + j] = static_cast<float>(o[j]);
    }
  }
}

void linear_attention_dense(const LinearAttentionParams& p, int num_tokens, const float* q,
                            const float* k, const float* v, float* out,
                            float* final_recurrent_state) {
  const int H = p.num_heads, d = p.head_dim, T = num_tokens;
  auto at = [&](const float* x, int t, int h, int i) {
    return double{x[(int64_t{t} * H + h) * d + i]};
  };
  std::vector<double> o(d);
  for (int h = 0; h < H; ++h) {
    const double slope = p.slope[h];
    for (int t = 0; t < T; ++t) {
      for (int j = 0; j < d; ++j) o[j] = 0.0;
      for (int s = 0; s <= t; ++s) {
        double qk = 0.0;
        for (int i = 0; i < d; ++i) qk += at(q, t, h, i) * at(k, s, h, i);
        const double w = std::exp(-slope * (t - s)) * qk;
        for (int j = 0; j < d; ++j) o[j] += w * at(v, s, h, j);
      }
      for (int j = 0; j < d; ++j) out[(int64_t{t} * H + h) * d + j] = static_cast<float>(o[j]);
    }
    if (final_recurrent_state == nullptr) continue;
    for (int i = 0; i < d; ++i) {
      for (int j = 0; j < d; ++j) {
        double s_final = 0.0;
        for (int s = 0; s < T; ++s) {
          s_final += std::exp(-slope * (T - 1 - s)) * at(k, s, h, i) * at(v, s, h, j);
        }
        final_recurrent_state[(int64_t{h} * d + i) * d + j] = static_cast<float>(s_final);
      }
    }
  }
}

}  // namespace attnkit::state
