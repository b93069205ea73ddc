// The synthetic inputs and the dense oracle the runtime checks every backend against.
#include "attnkit/runtime/dense_verifier.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "attnkit/core/numeric.h"
#include "attnkit/runtime/qkv_generator.h"

namespace attnkit {
namespace {

AttentionLayerParams decoder_layer(int heads, int kv_heads, int d) {
  AttentionLayerParams p;
  p.layer_index = 3;
  p.num_heads = heads;
  p.num_kv_heads = kv_heads;
  p.head_size = d;
  p.head_size_v = d;
  p.scale = 1.0f / std::sqrt(static_cast<float>(d));
  p.dtype = DType::kFloat32;
  return p;
}

std::vector<float> value_row(const QkvGenerator& g, const AttentionLayerParams& p, int request,
                             int position) {
  std::vector<float> v(static_cast<size_t>(p.num_kv_heads) * p.head_size_v);
  g.fill_row(QkvStream::kValue, key_source(p), p.layer_index, request, position, p.num_kv_heads,
             p.head_size_v, v.data());
  return v;
}

TEST(QkvGenerator, IsAPureFunctionOfItsCoordinates) {
  const QkvGenerator a(7, DType::kFloat32), b(7, DType::kFloat32), c(8, DType::kFloat32);
  std::set<float> seen;
  double sum = 0.0, sum_sq = 0.0;
  int n = 0;
  for (int pos = 0; pos < 20; ++pos) {
    for (int dim = 0; dim < 64; ++dim) {
      const float x = a.value(QkvStream::kKey, TokenSource::kDecoder, 1, 2, pos, 0, dim);
      EXPECT_EQ(x, b.value(QkvStream::kKey, TokenSource::kDecoder, 1, 2, pos, 0, dim));
      EXPECT_GE(x, -1.0f);
      EXPECT_LT(x, 1.0f);
      seen.insert(x);
      sum += x;
      sum_sq += static_cast<double>(x) * x;
      ++n;
    }
  }
  EXPECT_GT(seen.size(), 1200u);  // essentially no repeats
  EXPECT_NEAR(sum / n, 0.0, 0.05);
  EXPECT_NEAR(sum_sq / n, 1.0 / 3.0, 0.03);  // uniform on [-1, 1)
  // Every coordinate changes the value.
  const float base = a.value(QkvStream::kKey, TokenSource::kDecoder, 1, 2, 3, 0, 5);
  EXPECT_NE(base, c.value(QkvStream::kKey, TokenSource::kDecoder, 1, 2, 3, 0, 5));
  EXPECT_NE(base, a.value(QkvStream::kValue, TokenSource::kDecoder, 1, 2, 3, 0, 5));
  EXPECT_NE(base, a.value(QkvStream::kKey, TokenSource::kEncoder, 1, 2, 3, 0, 5));
  EXPECT_NE(base, a.value(QkvStream::kKey, TokenSource::kDecoder, 2, 2, 3, 0, 5));
  EXPECT_NE(base, a.value(QkvStream::kKey, TokenSource::kDecoder, 1, 3, 3, 0, 5));
  EXPECT_NE(base, a.value(QkvStream::kKey, TokenSource::kDecoder, 1, 2, 4, 0, 5));
  EXPECT_NE(base, a.value(QkvStream::kKey, TokenSource::kDecoder, 1, 2, 3, 1, 5));
  // fill_row agrees with value().
  std::vector<float> row(2 * 8);
  a.fill_row(QkvStream::kQuery, TokenSource::kDecoder, 4, 5, 6, 2, 8, row.data());
  EXPECT_EQ(row[8 + 3], a.value(QkvStream::kQuery, TokenSource::kDecoder, 4, 5, 6, 1, 3));
}

TEST(QkvGenerator, RoundsToTheComputeDtype) {
  const QkvGenerator g(1, DType::kBFloat16);
  for (int dim = 0; dim < 100; ++dim) {
    const float x = g.value(QkvStream::kQuery, TokenSource::kDecoder, 0, 0, 0, 0, dim);
    EXPECT_EQ(x, round_trip(ScalarType::kBFloat16, x));
  }
  const auto sinks = g.sinks(2, 8);
  ASSERT_EQ(sinks.size(), 8u);
  for (float s : sinks) {
    EXPECT_GE(s, 0.0f);
    EXPECT_LT(s, 2.0f);
  }
  EXPECT_NE(sinks, g.sinks(3, 8));
}

TEST(DenseVerifier, AQueryThatSeesOneKeyReturnsItsValue) {
  const QkvGenerator g(11, DType::kFloat32);
  const DenseVerifier verifier(g);
  // Window 1: only the query's own position is visible.
  AttentionLayerParams p = decoder_layer(4, 2, 16);
  p.sliding_window = 1;
  auto out = verifier.expected_output(p, {.request = 2, .position = 9, .kv_len = 10});
  auto v = value_row(g, p, 2, 9);
  for (int h = 0; h < 4; ++h) {
    for (int d = 0; d < 16; ++d) EXPECT_FLOAT_EQ(out[h * 16 + d], v[(h / 2) * 16 + d]);
  }
  // Chunked local: the first position of a chunk sees only itself.
  p.sliding_window = 0;
  p.chunk_size = 8;
  out = verifier.expected_output(p, {.request = 2, .position = 16, .kv_len = 17});
  v = value_row(g, p, 2, 16);
  EXPECT_FLOAT_EQ(out[5], v[5]);
  // A sink takes its share: out = v * e^s / (e^s + e^sink).
  p.chunk_size = 0;
  p.sinks = {0.5f, 0.5f, 0.5f, 0.5f};
  out = verifier.expected_output(p, {.request = 1, .position = 0, .kv_len = 1});
  v = value_row(g, p, 1, 0);
  std::vector<float> q(4 * 16), k(2 * 16);
  g.fill_row(QkvStream::kQuery, TokenSource::kDecoder, 3, 1, 0, 4, 16, q.data());
  g.fill_row(QkvStream::kKey, TokenSource::kDecoder, 3, 1, 0, 2, 16, k.data());
  double dot = 0.0;
  for (int d = 0; d < 16; ++d) dot += static_cast<double>(q[d]) * k[d];
  const double s = p.scale * dot;
  const double w = std::exp(s) / (std::exp(s) + std::exp(0.5));
  EXPECT_NEAR(out[7], w * v[7], 1e-6);
}

TEST(DenseVerifier, WindowChunkSoftCapAndNonCausalChangeTheOutput) {
  const QkvGenerator g(5, DType::kFloat32);
  const DenseVerifier verifier(g);
  const AttentionLayerParams full = decoder_layer(2, 1, 32);
  const QuerySite site{.request = 0, .position = 40, .kv_len = 41};
  const auto base = verifier.expected_output(full, site);
  auto differs = [&](const AttentionLayerParams& p, const QuerySite& s) {
    return row_relative_error(verifier.expected_output(p, s), base) > 1e-3;
  };
  AttentionLayerParams p = full;
  p.sliding_window = 41;  // covers everything: same output
  EXPECT_FALSE(differs(p, site));
  p.sliding_window = 40;  // drops key 0
  EXPECT_TRUE(differs(p, site));
  p = full;
  p.chunk_size = 41;
  EXPECT_FALSE(differs(p, site));
  p.chunk_size = 32;
  EXPECT_TRUE(differs(p, site));
  p = full;
  p.soft_cap = 0.05f;
  EXPECT_TRUE(differs(p, site));
  // Non-causal (encoder-only) attends over all kv_len keys, also those after the query.
  p = full;
  p.attn_type = AttentionType::kEncoderOnly;
  EXPECT_FALSE(differs(p, site));  // kv_len = position + 1: the same keys
  EXPECT_TRUE(differs(p, {.request = 0, .position = 40, .kv_len = 60}));
}

TEST(DenseVerifier, CrossAttentionReadsEncoderKeysAndMlaReadsTheLatentPrefix) {
  const QkvGenerator g(9, DType::kFloat32);
  const DenseVerifier verifier(g);
  AttentionLayerParams cross = decoder_layer(2, 2, 8);
  cross.attn_type = AttentionType::kEncoderDecoder;
  // One encoder token: the output is that encoder token's value, whatever the query.
  auto out = verifier.expected_output(cross, {.request = 4, .position = 30, .kv_len = 1});
  std::vector<float> v(2 * 8);
  g.fill_row(QkvStream::kValue, TokenSource::kEncoder, 3, 4, 0, 2, 8, v.data());
  for (int i = 0; i < 16; ++i) EXPECT_FLOAT_EQ(out[i], v[i]);

  AttentionLayerParams mla = decoder_layer(3, 1, 24);
  mla.use_mla = true;
  mla.head_size_v = 16;
  mla.mla_rope_dim = 8;
  out = verifier.expected_output(mla, {.request = 0, .position = 0, .kv_len = 1});
  ASSERT_EQ(out.size(), 3u * 16);
  std::vector<float> latent(24);
  g.fill_row(QkvStream::kKey, TokenSource::kDecoder, 3, 0, 0, 1, 24, latent.data());
  for (int h = 0; h < 3; ++h) {
    for (int d = 0; d < 16; ++d) EXPECT_FLOAT_EQ(out[h * 16 + d], latent[d]);
  }
}

TEST(DenseVerifier, CachedKeysAreRoundedToTheCacheDtype) {
  const QkvGenerator g(3, DType::kFloat32);
  const DenseVerifier verifier(g);
  AttentionLayerParams p = decoder_layer(1, 1, 8);
  p.sliding_window = 1;
  p.kv_cache_dtype = KvCacheDType::kFp8E4M3;
  p.v_scale = 0.5f;
  const auto out = verifier.expected_output(p, {.request = 0, .position = 3, .kv_len = 4});
  const auto v = value_row(g, p, 0, 3);
  for (int d = 0; d < 8; ++d) {
    EXPECT_FLOAT_EQ(out[d], round_trip(ScalarType::kFp8E4M3, v[d] / 0.5f) * 0.5f);
  }
}

TEST(RowRelativeError, IsRelativeToTheRowMaximumAndCatchesNonFinite) {
  const std::vector<float> expected{1.0f, -2.0f, 0.5f};
  EXPECT_DOUBLE_EQ(row_relative_error(std::vector<float>{1.0f, -2.0f, 0.5f}, expected), 0.0);
  EXPECT_NEAR(row_relative_error(std::vector<float>{1.0f, -2.1f, 0.5f}, expected), 0.05, 1e-6);
  EXPECT_TRUE(std::isinf(row_relative_error(std::vector<float>{NAN, -2.0f, 0.5f}, expected)));
  EXPECT_TRUE(std::isinf(row_relative_error(std::vector<float>{1.0f}, expected)));
  EXPECT_DOUBLE_EQ(
      row_relative_error(std::vector<float>{0.0f, 0.25f}, std::vector<float>{0.0f, 0.0f}), 0.25);
  EXPECT_LT(default_tolerance(DType::kFloat32), default_tolerance(DType::kBFloat16));
}

TEST(VerificationStats, KeepsTheMaximumPerKind) {
  VerificationStats stats;
  stats.add(KvCacheKind::kSlidingWindow, 0.01, 0, {.request = 1, .position = 2});
  stats.add(KvCacheKind::kSlidingWindow, 0.03, 5, {.request = 2, .position = 7});
  stats.add(KvCacheKind::kFullAttention, 0.02, 1, {.request = 0, .position = 0});
  EXPECT_DOUBLE_EQ(stats.max_rel_error(), 0.03);
  EXPECT_EQ(stats.rows_checked(), 3);
  const auto& sw = stats.by_kind().at(KvCacheKind::kSlidingWindow);
  EXPECT_EQ(sw.layer, 5);
  EXPECT_EQ(sw.position, 7);
}

}  // namespace
}  // namespace attnkit
