#include "dense_oracle.h"

#include <cmath>
#include <limits>

namespace attnkit::testing {

bool dense_visible(const DenseShape& s, int pos, int k) {
  if (!s.causal) return true;
  if (k > pos) return false;
  if (s.sliding_window > 0 && !(k > pos - s.sliding_window)) return false;
  if (s.chunk_size > 0 && k / s.chunk_size != pos / s.chunk_size) return false;
  return true;
}

std::vector<double> dense_attention(const DenseShape& s, const DenseRequest& r) {
  const int group = s.num_heads / s.num_kv_heads;
  std::vector<double> out(static_cast<size_t>(r.q_len) * s.num_heads * s.head_size_v, 0.0);
  for (int h = 0; h < s.num_heads; ++h) {
    const int kvh = h / group;
    // Materialise scores [q_len, kv_len] and the mask.
    std::vector<double> scores(static_cast<size_t>(r.q_len) * r.kv_len);
    std::vector<char> mask(scores.size());
    for (int i = 0; i < r.q_len; ++i) {
      const int pos = r.kv_len - r.q_len + i;
      for (int k = 0; k < r.kv_len; ++k) {
        double dot = 0;
        for (int d = 0; d < s.head_size; ++d) {
          dot += r.q[(static_cast<size_t>(i) * s.num_heads + h) * s.head_size + d] *
                 r.k[(static_cast<size_t>(k) * s.num_kv_heads + kvh) * s.head_size + d];
        }
        double x = s.scale * dot;
        if (s.soft_cap > 0) x = s.soft_cap * std::tanh(x / s.soft_cap);
        scores[static_cast<size_t>(i) * r.kv_len + k] = x;
        mask[static_cast<size_t>(i) * r.kv_len + k] = dense_visible(s, pos, k) ? 1 : 0;
      }
    }
    for (int i = 0; i < r.q_len; ++i) {
      double m = s.sinks.empty() ? -std::numeric_limits<double>::infinity() : s.sinks[h];
      for (int k = 0; k < r.kv_len; ++k) {
        if (mask[static_cast<size_t>(i) * r.kv_len + k]) {
          m = std::max(m, scores[static_cast<size_t>(i) * r.kv_len + k]);
        }
      }
      if (std::isinf(m)) continue;  // nothing visible, no sink: zeros
      std::vector<double> p(static_cast<size_t>(r.kv_len), 0.0);
      double denom = s.sinks.empty() ? 0.0 : std::exp(s.sinks[h] - m);
      for (int k = 0; k < r.kv_len; ++k) {
        if (mask[static_cast<size_t>(i) * r.kv_len + k]) {
          p[k] = std::exp(scores[static_cast<size_t>(i) * r.kv_len + k] - m);
          denom += p[k];
        }
      }
      for (int d = 0; d < s.head_size_v; ++d) {
        double acc = 0;
        for (int k = 0; k < r.kv_len; ++k) {
          acc += p[k] * r.v[(static_cast<size_t>(k) * s.num_kv_heads + kvh) * s.head_size_v + d];
        }
        out[(static_cast<size_t>(i) * s.num_heads + h) * s.head_size_v + d] = acc / denom;
      }
    }
  }
  return out;
}

}  // namespace attnkit::testing
