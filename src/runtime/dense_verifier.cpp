#include "attnkit/runtime/dense_verifier.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "attnkit/core/numeric.h"
#include "attnkit/kernels/mask.h"
#include "backend/state_ops.h"

namespace attnkit {
namespace {

bool uses_cache(const AttentionLayerParams& layer) {
  return layer.attn_type == AttentionType::kDecoder ||
         layer.attn_type == AttentionType::kEncoderDecoder;
}

MaskRule mask_of(const AttentionLayerParams& layer) {
  return MaskRule{layer.is_causal(), layer.sliding_window, layer.chunk_size};
}

}  // namespace

std::vector<float> DenseVerifier::expected_state_output(const AttentionLayerParams& layer,
                                                        int request, int position) const {
  ATTNKIT_CHECK(layer.state.has_value(), "expected_state_output needs a state layer");
  const StateLayerDims& dims = *layer.state;
  const auto in_w = static_cast<size_t>(dims.input_width());
  const auto out_w = static_cast<size_t>(dims.output_width());
  StateOutputs& cached = state_outputs_[{layer.layer_index, request}];
  if (position >= cached.num_tokens) {
    const int n = std::max(position + 1, 2 * cached.num_tokens);
    std::vector<float> input(static_cast<size_t>(n) * in_w);
    for (int t = 0; t < n; ++t) {
      gen_.fill_row(QkvStream::kQuery, TokenSource::kDecoder, layer.layer_index, request, t, 1,
                    dims.input_width(), input.data() + static_cast<size_t>(t) * in_w);
    }
    cached.rows.assign(static_cast<size_t>(n) * out_w, 0.0f);
    run_state_layer_dense(dims, layer.state_params, n, input.data(), cached.rows.data());
    cached.num_tokens = n;
  }
  const auto first = cached.rows.begin() + static_cast<std::ptrdiff_t>(position * out_w);
  return {first, first + static_cast<std::ptrdiff_t>(out_w)};
}

std::vector<float> DenseVerifier::expected_output(const AttentionLayerParams& layer,
                                                  const QuerySite& site) const {
  const int heads = layer.num_heads;
  const int kv_heads = layer.num_kv_heads;
  const int d = layer.head_size;
  const int dv = layer.head_size_v;
  const int group = heads / kv_heads;
  const TokenSource qsrc = query_source(layer);
  const TokenSource ksrc = key_source(layer);
  const int kv_len = layer.is_causal() ? site.position + 1 : site.kv_len;
  const KeySpan keys = visible_keys(mask_of(layer), site.position, kv_len);
  const int lo = keys.begin;
  const int visible = keys.size();

  // What the kernel reads back: through the cache dtype for cached layers.
  const bool cached = uses_cache(layer);
  const ScalarType kv_type = scalar_type_of(layer.kv_cache_dtype, layer.dtype);
  const bool fp8 = is_fp8(layer.kv_cache_dtype);
  const auto stored = [&](float x, float scale) {
    if (!cached) return x;
    return fp8 ? round_trip(kv_type, x / scale) * scale : round_trip(kv_type, x);
  };

  std::vector<float> q(static_cast<size_t>(heads) * d);
  gen_.fill_row(QkvStream::kQuery, qsrc, layer.layer_index, site.request, site.position, heads, d,
                q.data());
  // Keys [visible, kv_heads, d] and values [visible, kv_heads, dv].
  std::vector<float> k(static_cast<size_t>(visible) * kv_heads * d);
  std::vector<float> v(static_cast<size_t>(visible) * kv_heads * dv);
  for (int j = 0; j < visible; ++j) {
    float* krow = k.data() + static_cast<size_t>(j) * kv_heads * d;
    float* vrow = v.data() + static_cast<size_t>(j) * kv_heads * dv;
    gen_.fill_row(QkvStream::kKey, ksrc, layer.layer_index, site.request, lo + j, kv_heads, d,
                  krow);
    for (int e = 0; e < kv_heads * d; ++e) krow[e] = stored(krow[e], layer.k_scale);
    if (layer.use_mla) {
      // V is the latent's prefix: the same stored values the key read.
      for (int e = 0; e < dv; ++e) vrow[e] = krow[e];
    } else {
      gen_.fill_row(QkvStream::kValue, ksrc, layer.layer_index, site.request, lo + j, kv_heads, dv,
                    vrow);
      for (int e = 0; e < kv_heads * dv; ++e) vrow[e] = stored(vrow[e], layer.v_scale);
    }
  }

  std::vector<float> out(static_cast<size_t>(heads) * dv, 0.0f);
  std::vector<double> scores(static_cast<size_t>(visible));
  std::vector<double> acc(static_cast<size_t>(dv));
  for (int h = 0; h < heads; ++h) {
    const int kvh = h / group;
    const float* qh = q.data() + static_cast<size_t>(h) * d;
    double m = -std::numeric_limits<double>::infinity();
    for (int j = 0; j < visible; ++j) {
      const float* kj = k.data() + (static_cast<size_t>(j) * kv_heads + kvh) * d;
      double dot = 0.0;
      for (int e = 0; e < d; ++e) dot += static_cast<double>(qh[e]) * kj[e];
      double s = layer.scale * dot;
      if (layer.soft_cap > 0.0f) s = layer.soft_cap * std::tanh(s / layer.soft_cap);
      scores[static_cast<size_t>(j)] = s;
      m = std::max(m, s);
    }
    const bool has_sink = !layer.sinks.empty();
    const double sink = has_sink ? layer.sinks[static_cast<size_t>(h)] : 0.0;
    if (has_sink) m = std::max(m, sink);
    if (visible == 0 && !has_sink) continue;  // sees nothing: zeros
    double denom = has_sink ? std::exp(sink - m) : 0.0;
    std::fill(acc.begin(), acc.end(), 0.0);
    for (int j = 0; j < visible; ++j) {
      const double w = std::exp(scores[static_cast<size_t>(j)] - m);
      denom += w;
      const float* vj = v.data() + (static_cast<size_t>(j) * kv_heads + kvh) * dv;
      for (int e = 0; e < dv; ++e) acc[static_cast<size_t>(e)] += w * vj[e];
    }
    for (int e = 0; e < dv; ++e) {
      out[static_cast<size_t>(h) * dv + e] =
          static_cast<float>(acc[static_cast<size_t>(e)] / denom);
    }
  }
  return out;
}

double row_relative_error(std::span<const float> actual, std::span<const float> expected) {
  double diff = 0.0, scale = 0.0;
  const size_t n = std::min(actual.size(), expected.size());
  for (size_t i = 0; i < n; ++i) {
    const double a = actual[i];
    if (!std::isfinite(a)) return std::numeric_limits<double>::infinity();
    diff = std::max(diff, std::abs(a - expected[i]));
    scale = std::max(scale, std::abs(static_cast<double>(expected[i])));
  }
  if (actual.size() != expected.size()) return std::numeric_limits<double>::infinity();
  return scale > 0.0 ? diff / scale : diff;
}

double default_tolerance(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return 1e-3;
    case DType::kFloat16:
      return 5e-3;
    case DType::kBFloat16:
      return 2e-2;
  }
  return 2e-2;
}

void VerificationStats::add(KvCacheKind kind, double rel_error, int layer, const QuerySite& site) {
  KindStats& s = by_kind_[kind];
  ++s.rows_checked;
  if (rel_error > s.max_rel_error || s.layer < 0) {
    s.max_rel_error = std::max(s.max_rel_error, rel_error);
    s.layer = layer;
    s.request = site.request;
    s.position = site.position;
  }
}

double VerificationStats::max_rel_error() const {
  double m = 0.0;
  for (const auto& [kind, s] : by_kind_) m = std::max(m, s.max_rel_error);
  return m;
}

long VerificationStats::rows_checked() const {
  long n = 0;
  for (const auto& [kind, s] : by_kind_) n += s.rows_checked;
  return n;
}

}  // namespace attnkit
