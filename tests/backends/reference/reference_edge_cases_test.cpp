// Numerical edge cases of the REFERENCE kernels: huge logits, windows wider than the
// context, one-token contexts, rows that see no key (with and without sinks).

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "backends/reference/reference_kernels.h"
#include "paged_harness.h"

namespace attnkit::testing {
namespace {

// Contiguous-mode problem over float32 rows: one request, q [q_len, 1, d], k/v [kv_len, 1, d].
struct Contiguous {
  int q_len = 1, kv_len = 1, d = 2;
  std::vector<float> q, k, v, out;
  std::vector<int32_t> qsl, lens, start{0};
  PagedAttentionParams params() {
    out.assign(static_cast<size_t>(q_len) * d, std::nanf(""));
    qsl = {0, q_len};
    lens = {kv_len};
    PagedAttentionParams p;
    p.q = q.data();
    p.out = out.data();
    p.q_token_stride = d;
    p.q_head_stride = d;
    p.o_token_stride = d;
    p.o_head_stride = d;
    p.k_cache = k.data();
    p.v_cache = v.data();
    p.k_token_stride = d;
    p.v_token_stride = d;
    p.num_seqs = 1;
    p.query_start_loc = qsl.data();
    p.seq_lens = lens.data();
    p.kv_start_loc = start.data();
    p.num_heads = 1;
    p.num_kv_heads = 1;
    p.head_size = d;
    p.head_size_v = d;
    return p;
  }
};

TEST(ReferenceEdgeCases, HugeLogitsGiveTheArgmaxValueWithoutOverflow) {
  Contiguous c;
  c.kv_len = 3;
  c.q = {100.0f, 0.0f};
  c.k = {100.0f, 0.0f, 300.0f, 0.0f, 200.0f, 0.0f};  // scores 1e4, 3e4, 2e4
  c.v = {1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f};
  PagedAttentionParams p = c.params();
  p.causal = false;
  reference_paged_attention(p);
  EXPECT_EQ(c.out[0], 3.0f);
  EXPECT_EQ(c.out[1], 4.0f);

  AttentionLayerParams layer;
  layer.num_heads = 4;
  layer.num_kv_heads = 2;
  layer.head_size = layer.head_size_v = 16;
  layer.dtype = DType::kFloat32;
  PagedProblem pb;
  pb.layer = layer;
  pb.q_lens = {6, 1};
  pb.seq_lens = {6, 40};
  pb.value_magnitude = 40.0;  // scores up to ~2.5e4
  const PagedRun run = run_paged(pb);
  for (double x : run.out) ASSERT_TRUE(std::isfinite(x));
  EXPECT_LE(tolerance_ratio(run.out, run.expected, 1e-5, 1e-3), 1.0);
}

TEST(ReferenceEdgeCases, WindowAndChunkLargerThanContextChangeNothing) {
  AttentionLayerParams layer;
  layer.num_heads = 2;
  layer.num_kv_heads = 1;
  layer.head_size = layer.head_size_v = 8;
  layer.dtype = DType::kFloat32;
  PagedProblem pb;
  pb.layer = layer;
  pb.q_lens = {4, 1};
  pb.seq_lens = {10, 25};
  const PagedRun full = run_paged(pb);
  pb.layer.sliding_window = 10000;
  EXPECT_EQ(run_paged(pb).out, full.out);
  pb.layer.sliding_window = 0;
  pb.layer.chunk_size = 4096;
  EXPECT_EQ(run_paged(pb).out, full.out);
}

TEST(ReferenceEdgeCases, OneTokenContextReturnsItsValue) {
  Contiguous c;
  c.q = {0.3f, -1.2f};
  c.k = {2.0f, 0.5f};
  c.v = {1.5f, -0.25f};
  reference_paged_attention(c.params());
  EXPECT_EQ(c.out[0], 1.5f);
  EXPECT_EQ(c.out[1], -0.25f);

  // With a sink the single key keeps weight 1 / (1 + exp(sink - s)).
  const float sink = 0.7f;
  PagedAttentionParams p = c.params();
  p.sinks = &sink;
  reference_paged_attention(p);
  const double s = 0.3 * 2.0 + -1.2 * 0.5;
  const double w = 1.0 / (1.0 + std::exp(sink - s));
  EXPECT_NEAR(c.out[0], 1.5 * w, 1e-6);
  EXPECT_NEAR(c.out[1], -0.25 * w, 1e-6);
}

TEST(ReferenceEdgeCases, RowsThatSeeNoKeyWriteZerosWithOrWithoutSinks) {
  Contiguous c;
  c.kv_len = 0;
  c.q = {1.0f, 2.0f};
  PagedAttentionParams p = c.params();
  p.causal = false;
  reference_paged_attention(p);
  EXPECT_EQ(c.out, (std::vector<float>{0.0f, 0.0f}));
  const float sink = 5.0f;
  p = c.params();
  p.causal = false;
  p.sinks = &sink;
  reference_paged_attention(p);
  EXPECT_EQ(c.out, (std::vector<float>{0.0f, 0.0f}));

  // Through the backend: cross attention to an empty encoder output, next to a normal one.
  AttentionLayerParams layer;
  layer.attn_type = AttentionType::kEncoderDecoder;
  layer.num_heads = 2;
  layer.num_kv_heads = 2;
  layer.head_size = layer.head_size_v = 8;
  layer.dtype = DType::kFloat32;
  layer.sinks = {1.0f, -1.0f};
  PagedProblem pb;
  pb.layer = layer;
  pb.q_lens = {2, 3};
  pb.seq_lens = {0, 5};
  const PagedRun run = run_paged(pb);
  for (size_t i = 0; i < 2 * 2 * 8; ++i) EXPECT_EQ(run.out[i], 0.0) << i;
  EXPECT_LE(tolerance_ratio(run.out, run.expected, 1e-5, 1e-5), 1.0);
}

TEST(ReferenceEdgeCases, SinkDominatesWhenItsLogitIsHuge) {
  Contiguous c;
  c.kv_len = 2;
  c.q = {1.0f, 0.0f};
  c.k = {1.0f, 0.0f, 2.0f, 0.0f};
  c.v = {1.0f, 1.0f, 2.0f, 2.0f};
  const float sink = 1e4f;
  PagedAttentionParams p = c.params();
  p.causal = false;
  p.sinks = &sink;
  reference_paged_attention(p);
  EXPECT_EQ(c.out[0], 0.0f);  // exp(2 - 1e4) underflows: the sink takes all the weight
  EXPECT_TRUE(std::isfinite(c.out[1]));
}

}  // namespace
}  // namespace attnkit::testing
