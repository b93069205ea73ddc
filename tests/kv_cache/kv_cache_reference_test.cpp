// End to end through the memory side: plan -> storage -> block tables -> per-step metadata
// -> the REFERENCE backend's forward, over several steps of mixed prefill chunks and
// decodes with block release and virtual kernel blocks, checked against attention
// computed directly from every token's K/V history (fresh random inputs, fp32).

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "attnkit/kv_cache/common_metadata_builder.h"
#include "attnkit/kv_cache/kv_cache_storage.h"
#include "attnkit/kv_cache/spec_factory.h"
#include "backends/reference/reference_backend.h"

namespace attnkit {
namespace {

// The reference backend's kernels behind other block-size and layout declarations, so the
// planner has to split cache blocks into kernel blocks and lay them out HND.
class Reshaped final : public AttentionBackend {
 public:
  Reshaped(SizeRule kernel_sizes, int preferred, KvLayout layout)
      : inner_(make_reference_backend()), caps_(inner_->capabilities()) {
    caps_.kernel_block_sizes = std::move(kernel_sizes);
    caps_.preferred_block_size = preferred;
    caps_.required_layout = layout;
  }
  std::string_view name() const override { return "RESHAPED_REFERENCE"; }
  std::string_view description() const override { return "reference kernels, other block sizes"; }
  const BackendCapabilities& capabilities() const override { return caps_; }
  std::unique_ptr<MetadataBuilder> make_builder(const KvCacheSpec& spec,
                                                const AttentionLayerParams& layer) const override {
    return inner_->make_builder(spec, layer);
  }
  std::unique_ptr<AttentionImpl> make_impl(const AttentionLayerParams& layer) const override {
    return inner_->make_impl(layer);
  }

 private:
  std::unique_ptr<AttentionBackend> inner_;
  BackendCapabilities caps_;
};

constexpr int kHeads = 4, kKvHeads = 2, kHead = 16, kWindow = 24;

struct Layer {
  AttentionLayerParams params;
  std::unique_ptr<AttentionImpl> impl;
};

// out[h][:] for one query at absolute position p over keys 0..p of `k`/`v` (rows of
// [kKvHeads * kHead]), honouring the window.
std::vector<float> expected_row(const std::vector<float>& q, const std::vector<float>& k,
                                const std::vector<float>& v, int p, int window, float scale) {
  std::vector<float> out(kHeads * kHead, 0.0f);
  for (int h = 0; h < kHeads; ++h) {
    const int kvh = h / (kHeads / kKvHeads);
    std::vector<double> s;
    int first = window > 0 ? std::max(0, p - window + 1) : 0;
    double m = -1e300;
    for (int j = first; j <= p; ++j) {
      double dot = 0;
      for (int d = 0; d < kHead; ++d) {
        dot += double{q[static_cast<size_t>(h * kHead + d)]} *
               k[static_cast<size_t>((j * kKvHeads + kvh) * kHead + d)];
      }
      s.push_back(dot * scale);
      m = std::max(m, s.back());
    }
    double denom = 0;
    std::vector<double> acc(kHead, 0.0);
    for (int j = first; j <= p; ++j) {
      const double w = std::exp(s[static_cast<size_t>(j - first)] - m);
      denom += w;
      for (int d = 0; d < kHead; ++d) {
        acc[static_cast<size_t>(d)] += w * v[static_cast<size_t>((j * kKvHeads + kvh) * kHead + d)];
      }
    }
    for (int d = 0; d < kHead; ++d) {
      out[static_cast<size_t>(h * kHead + d)] =
          static_cast<float>(acc[static_cast<size_t>(d)] / denom);
    }
  }
  return out;
}

TEST(KvCacheWithReferenceBackend, MixedStepsMatchDirectAttention) {
  const Reshaped nhd4(SizeRule::list({4}), 8, KvLayout::kNHD);
  const Reshaped hnd(SizeRule::any(), 16, KvLayout::kHND);
  const KvHeadShape shape{kKvHeads, kHead, kHead, ScalarType::kFloat32};
  // Layers 0, 2: sliding window on nhd4; layers 1, 3: full attention on hnd.
  std::vector<LayerKvInput> inputs;
  std::vector<Layer> layers;
  for (int i = 0; i < 4; ++i) {
    const bool sliding = i % 2 == 0;
    inputs.push_back({i, sliding ? sliding_window_spec(shape, kWindow) : full_attention_spec(shape),
                      sliding ? static_cast<const AttentionBackend*>(&nhd4) : &hnd});
    AttentionLayerParams p;
    p.layer_index = i;
    p.kind = inputs.back().spec.kind;
    p.num_heads = kHeads;
    p.num_kv_heads = kKvHeads;
    p.head_size = p.head_size_v = kHead;
    p.scale = 1.0f / std::sqrt(float{kHead});
    p.sliding_window = sliding ? kWindow : 0;
    p.dtype = DType::kFloat32;
    layers.push_back({p, inputs.back().backend->make_impl(p)});
  }
  const KvCacheConfig config = plan_kv_cache(inputs);
  ASSERT_EQ(config.groups.size(), 2u);
  // The sliding layers prefer 8 and the full ones 16 with equal bytes per token: page
  // unification gives both 16-token blocks, which the sliding backend runs as 4 x 4.
  ASSERT_EQ(config.groups[0].spec.block_size, 16);
  ASSERT_EQ(config.groups[0].kernel_blocks_per_block(), 4);
  const int num_blocks = 40;
  KvCacheStorage storage(config, num_blocks);
  KvCacheManager kv(config, num_blocks);
  std::vector<std::unique_ptr<MetadataBuilder>> builders;
  for (const KvCacheGroup& g : config.groups) {
    builders.push_back(inputs[static_cast<size_t>(g.layer_indices[0])].backend->make_builder(
        g.spec, layers[static_cast<size_t>(g.layer_indices[0])].params));
  }

  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  // Per request, per layer: the K/V rows of every token so far.
  std::map<RequestId, std::vector<std::vector<float>>> k_hist, v_hist;
  std::map<RequestId, int> computed;
  // Steps: (request, new tokens). Request 2 joins late; request 0 finishes early.
  const std::vector<std::vector<std::pair<RequestId, int>>> steps{
      {{0, 13}, {1, 30}}, {{0, 1}, {1, 9}}, {{0, 1}, {1, 1}, {2, 21}},
      {{1, 1}, {2, 19}},  {{1, 1}, {2, 1}}, {{1, 2}, {2, 1}}};
  for (size_t step = 0; step < steps.size(); ++step) {
    if (step == 3) {
      kv.free_request(0);
      computed.erase(0);
    }
    std::vector<StepRequest> batch;
    int total = 0;
    for (auto [id, n] : steps[step]) {
      if (!kv.has_request(id)) {
        kv.add_request(id);
        k_hist[id].assign(4, {});
        v_hist[id].assign(4, {});
      }
      ASSERT_TRUE(kv.allocate_slots(id, computed[id], n));
      batch.push_back({id, computed[id], n});
      total += n;
    }
    const std::vector<CommonAttentionMetadata> common = build_step_metadata(kv, batch);
    for (int li = 0; li < 4; ++li) {
      int buffer = 0;
      const KvCacheGroup& g = config.group_of_layer(li, &buffer);
      const AttentionMetadata& plan =
          builders[static_cast<size_t>(g.group_id)]->build(common[static_cast<size_t>(g.group_id)]);
      const int row = kKvHeads * kHead;
      std::vector<float> q(static_cast<size_t>(total * kHeads * kHead));
      std::vector<float> k(static_cast<size_t>(total * row)), v(k.size());
      std::vector<float> out(q.size(), 0.0f);
      for (auto& x : q) x = uni(rng);
      for (auto& x : k) x = uni(rng);
      for (auto& x : v) x = uni(rng);
      layers[static_cast<size_t>(li)].impl->forward(
          TensorView::contiguous(q.data(), ScalarType::kFloat32, {total, kHeads, kHead}),
          TensorView::contiguous(k.data(), ScalarType::kFloat32, {total, kKvHeads, kHead}),
          TensorView::contiguous(v.data(), ScalarType::kFloat32, {total, kKvHeads, kHead}),
          storage.tensors(li), plan,
          TensorView::contiguous(out.data(), ScalarType::kFloat32, {total, kHeads, kHead}));
      int t = 0;
      for (const StepRequest& r : batch) {
        auto& kh = k_hist[r.id][static_cast<size_t>(li)];
        auto& vh = v_hist[r.id][static_cast<size_t>(li)];
        kh.insert(kh.end(), k.begin() + t * row, k.begin() + (t + r.num_new_tokens) * row);
        vh.insert(vh.end(), v.begin() + t * row, v.begin() + (t + r.num_new_tokens) * row);
        for (int j = 0; j < r.num_new_tokens; ++j, ++t) {
          const int p = r.num_computed_tokens + j;
          const std::vector<float> qrow(q.begin() + t * kHeads * kHead,
                                        q.begin() + (t + 1) * kHeads * kHead);
          const std::vector<float> want =
              expected_row(qrow, kh, vh, p, layers[static_cast<size_t>(li)].params.sliding_window,
                           layers[static_cast<size_t>(li)].params.scale);
          for (int e = 0; e < kHeads * kHead; ++e) {
            ASSERT_NEAR(out[static_cast<size_t>(t * kHeads * kHead + e)],
                        want[static_cast<size_t>(e)], 1e-5f)
                << "step " << step << " layer " << li << " request " << r.id << " pos " << p;
          }
        }
      }
    }
    for (const StepRequest& r : batch) computed[r.id] += r.num_new_tokens;
    ASSERT_EQ(kv.check_invariants(), "");
  }
  // The sliding group really released blocks on the way.
  const auto table = kv.block_table(1, config.groups[0].group_id);
  EXPECT_EQ(table.front(), BlockPool::kNullBlock);
}

}  // namespace
}  // namespace attnkit
