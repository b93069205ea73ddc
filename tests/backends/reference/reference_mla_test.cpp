// MLA: the REFERENCE backend runs the absorbed formulation (queries projected into the
// latent space, attention over the latent cache [c, k_pe], output in latent space). Here it
// is checked against the original, un-absorbed formulation computed densely: per head,
// k = [W_UK c, k_pe], v = W_UV c, q = [q_nope, q_pe], softmax(scale q.k) v.
// Steps: a prefill, a decode over that cache, then a prefill chunk (all causal).

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "attnkit/core/tensor.h"
#include "backends/reference/reference_backend.h"

namespace attnkit::testing {
namespace {

constexpr int kHeads = 3, kLora = 32, kRope = 16, kNope = 24, kVHead = 20;
constexpr int kLatent = kLora + kRope;
constexpr int kBlock = 4, kBlocks = 8;

struct MlaWeights {
  std::vector<double> w_uk;  // [H, kLora, kNope]
  std::vector<double> w_uv;  // [H, kLora, kVHead]
};

double rnd(std::mt19937_64& g) { return std::uniform_real_distribution<double>(-1, 1)(g); }

TEST(ReferenceMla, AbsorbedMatchesUnabsorbedDenseOverPrefillDecodeAndChunk) {
  std::mt19937_64 gen(42);
  MlaWeights w;
  for (int i = 0; i < kHeads * kLora * kNope; ++i) w.w_uk.push_back(rnd(gen) * 0.3);
  for (int i = 0; i < kHeads * kLora * kVHead; ++i) w.w_uv.push_back(rnd(gen) * 0.3);
  const double scale = 1.0 / std::sqrt(static_cast<double>(kNope + kRope));

  AttentionLayerParams layer;
  layer.num_heads = kHeads;
  layer.num_kv_heads = 1;
  layer.head_size = kLatent;
  layer.head_size_v = kLora;
  layer.use_mla = true;
  layer.mla_rope_dim = kRope;
  layer.scale = static_cast<float>(scale);
  layer.dtype = DType::kFloat32;
  auto backend = make_reference_backend();
  auto builder = backend->make_builder(KvCacheSpec{}, layer);
  auto impl = backend->make_impl(layer);

  HostTensor cache_key(ScalarType::kFloat32, {kBlocks, kBlock, 1, kLatent});
  KvCacheTensors cache;
  cache.key = cache_key.view();
  cache.block_size = kBlock;

  std::vector<std::vector<float>> latents;  // per position: [c (kLora), k_pe (kRope)]
  int seq_len = 0;
  for (int q_len : {7, 1, 3}) {
    // This step's latent vectors and queries (q_nope, q_pe per head).
    HostTensor key(ScalarType::kFloat32, {q_len, 1, kLatent});
    HostTensor query(ScalarType::kFloat32, {q_len, kHeads, kLatent});
    HostTensor out(ScalarType::kFloat32, {q_len, kHeads, kLora});
    std::vector<double> q_nope(static_cast<size_t>(q_len) * kHeads * kNope);
    std::vector<double> q_pe(static_cast<size_t>(q_len) * kHeads * kRope);
    for (double& x : q_nope) x = static_cast<float>(rnd(gen));
    for (double& x : q_pe) x = static_cast<float>(rnd(gen));
    for (int t = 0; t < q_len; ++t) {
      std::vector<float> lat(kLatent);
      for (float& x : lat) x = static_cast<float>(rnd(gen));
      std::copy(lat.begin(), lat.end(), key.data_as<float>() + t * kLatent);
      latents.push_back(lat);
      for (int h = 0; h < kHeads; ++h) {
        float* q = query.data_as<float>() + (t * kHeads + h) * kLatent;
        for (int i = 0; i < kLora; ++i) {  // absorb W_UK into the query
          double acc = 0;
          for (int j = 0; j < kNope; ++j) {
            acc += w.w_uk[(h * kLora + i) * kNope + j] * q_nope[(t * kHeads + h) * kNope + j];
          }
          q[i] = static_cast<float>(acc);
        }
        for (int j = 0; j < kRope; ++j)
          q[kLora + j] = static_cast<float>(q_pe[(t * kHeads + h) * kRope + j]);
      }
    }
    seq_len += q_len;
    CommonAttentionMetadata common;
    common.num_reqs = 1;
    common.num_actual_tokens = q_len;
    common.query_start_loc = {0, q_len};
    common.seq_lens = {seq_len};
    common.block_table = {5, 2, 7, 0, 1, 3, 4, 6};  // a scrambled page order
    common.max_blocks_per_req = kBlocks;
    common.block_size = kBlock;
    for (int t = 0; t < q_len; ++t) {
      const int pos = seq_len - q_len + t;
      common.slot_mapping.push_back(common.block_table[static_cast<size_t>(pos / kBlock)] * kBlock +
                                    pos % kBlock);
    }
    common.max_query_len = q_len;
    common.max_seq_len = seq_len;
    impl->forward(query.view(), key.view(), TensorView{}, cache, builder->build(common),
                  out.view());

    for (int t = 0; t < q_len; ++t) {
      const int pos = seq_len - q_len + t;
      for (int h = 0; h < kHeads; ++h) {
        // Un-absorbed dense attention for (t, h).
        std::vector<double> scores;
        double m = -INFINITY;
        for (int k = 0; k <= pos; ++k) {
          const std::vector<float>& lat = latents[static_cast<size_t>(k)];
          double s = 0;
          for (int j = 0; j < kNope; ++j) {
            double k_nope = 0;
            for (int i = 0; i < kLora; ++i) k_nope += lat[i] * w.w_uk[(h * kLora + i) * kNope + j];
            s += q_nope[(t * kHeads + h) * kNope + j] * k_nope;
          }
          for (int j = 0; j < kRope; ++j) s += q_pe[(t * kHeads + h) * kRope + j] * lat[kLora + j];
          scores.push_back(scale * s);
          m = std::max(m, scale * s);
        }
        double denom = 0;
        std::vector<double> o(kVHead, 0.0);
        for (int k = 0; k <= pos; ++k) {
          const double p = std::exp(scores[static_cast<size_t>(k)] - m);
          denom += p;
          for (int e = 0; e < kVHead; ++e) {
            double v = 0;
            for (int i = 0; i < kLora; ++i)
              v += latents[static_cast<size_t>(k)][i] * w.w_uv[(h * kLora + i) * kVHead + e];
            o[e] += p * v;
          }
        }
        // The backend's latent output, projected through W_UV.
        const float* lat_out = out.data_as<float>() + (t * kHeads + h) * kLora;
        for (int e = 0; e < kVHead; ++e) {
          double got = 0;
          for (int i = 0; i < kLora; ++i) got += lat_out[i] * w.w_uv[(h * kLora + i) * kVHead + e];
          EXPECT_NEAR(got, o[e] / denom, 2e-5)
              << "step q_len " << q_len << " t " << t << " h " << h;
        }
      }
    }
  }
}

}  // namespace
}  // namespace attnkit::testing
