// The paged REFERENCE backend against the independent dense oracle, feature by feature.
// Every case runs a mixed batch (a prefill from scratch, a prefill chunk over cached
// context, decodes) with blocks in random physical order, and checks both the output and
// the bytes forward() wrote into the cache.

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "paged_harness.h"

namespace attnkit::testing {
namespace {

AttentionLayerParams base_layer(int heads = 4, int kv_heads = 2, int head_size = 32) {
  AttentionLayerParams layer;
  layer.num_heads = heads;
  layer.num_kv_heads = kv_heads;
  layer.head_size = head_size;
  layer.head_size_v = head_size;
  layer.scale = 1.0f / std::sqrt(static_cast<float>(head_size));
  layer.dtype = DType::kFloat32;
  layer.kv_cache_dtype = KvCacheDType::kAuto;
  return layer;
}

PagedProblem mixed_batch(const AttentionLayerParams& layer, uint64_t seed = 7) {
  PagedProblem pb;
  pb.layer = layer;
  pb.block_size = 4;
  pb.q_lens = {9, 5, 1, 1};
  pb.seq_lens = {9, 23, 33, 1};
  pb.seed = seed;
  return pb;
}

void expect_matches_dense(const PagedProblem& pb, const std::string& what) {
  const PagedRun run = run_paged(pb);
  const double rtol = output_rtol(pb.layer.dtype);
  EXPECT_LE(tolerance_ratio(run.out, run.expected, rtol, rtol), 1.0) << what;
  EXPECT_EQ(run.cache_bytes, run.expected_cache_bytes) << what << ": cache contents";
}

TEST(ReferenceFeatures, HeadGroupingMhaGqaMqa) {
  expect_matches_dense(mixed_batch(base_layer(4, 4, 16)), "MHA");
  expect_matches_dense(mixed_batch(base_layer(8, 2, 16)), "GQA 4:1");
  expect_matches_dense(mixed_batch(base_layer(6, 1, 16)), "MQA");
}

TEST(ReferenceFeatures, OddHeadSizeAndSeparateValueHeadSize) {
  AttentionLayerParams layer = base_layer(4, 2, 24);
  layer.head_size_v = 40;
  expect_matches_dense(mixed_batch(layer), "head 24 / v 40");
  layer = base_layer(2, 1, 7);
  layer.head_size_v = 3;
  expect_matches_dense(mixed_batch(layer), "head 7 / v 3");
}

TEST(ReferenceFeatures, SlidingWindow) {
  for (int window : {1, 3, 8, 20}) {
    AttentionLayerParams layer = base_layer();
    layer.sliding_window = window;
    expect_matches_dense(mixed_batch(layer), "window " + std::to_string(window));
  }
}

TEST(ReferenceFeatures, ChunkedLocalAttention) {
  for (int chunk : {1, 4, 7, 16}) {
    AttentionLayerParams layer = base_layer();
    layer.chunk_size = chunk;
    expect_matches_dense(mixed_batch(layer), "chunk " + std::to_string(chunk));
  }
}

TEST(ReferenceFeatures, SinksSoftCapAndCustomScale) {
  AttentionLayerParams layer = base_layer();
  layer.sinks = {0.5f, -2.0f, 3.0f, 1.0f};
  expect_matches_dense(mixed_batch(layer), "sinks");
  layer = base_layer();
  layer.soft_cap = 2.5f;
  PagedProblem pb = mixed_batch(layer);
  pb.value_magnitude = 3.0;  // push scores into tanh's curved region
  expect_matches_dense(pb, "soft-cap");
  layer = base_layer();
  layer.scale = 0.9f;
  expect_matches_dense(mixed_batch(layer), "custom scale");
  layer.sliding_window = 6;
  layer.sinks = {1.0f, 0.0f, -1.0f, 2.0f};
  layer.soft_cap = 4.0f;
  expect_matches_dense(mixed_batch(layer), "window + sinks + soft-cap");
}

TEST(ReferenceFeatures, EncoderOnlyAndEncoderAreBidirectionalWithoutCache) {
  for (AttentionType type : {AttentionType::kEncoderOnly, AttentionType::kEncoder}) {
    AttentionLayerParams layer = base_layer(4, 2, 16);
    layer.attn_type = type;
    PagedProblem pb = mixed_batch(layer);
    pb.q_lens = {5, 1, 12};
    pb.seq_lens = pb.q_lens;
    expect_matches_dense(pb, std::string(to_string(type)));
  }
}

TEST(ReferenceFeatures, CrossAttentionOverCachedEncoderStates) {
  AttentionLayerParams layer = base_layer(4, 2, 16);
  layer.attn_type = AttentionType::kEncoderDecoder;
  PagedProblem pb = mixed_batch(layer);
  pb.q_lens = {3, 1, 7};      // decoder tokens
  pb.seq_lens = {11, 30, 2};  // encoder lengths (fewer than queries in the last one)
  expect_matches_dense(pb, "cross");
}

TEST(ReferenceFeatures, MlaLatentCacheDecodeAndPrefill) {
  AttentionLayerParams layer = base_layer(4, 1, 48);  // kv_lora_rank 32 + rope 16
  layer.use_mla = true;
  layer.mla_rope_dim = 16;
  layer.head_size_v = 32;
  expect_matches_dense(mixed_batch(layer), "MLA small");
  layer = base_layer(2, 1, 576);
  layer.use_mla = true;
  layer.mla_rope_dim = 64;
  layer.head_size_v = 512;
  layer.kv_cache_dtype = KvCacheDType::kFp8E4M3;
  layer.k_scale = 0.05f;
  PagedProblem pb = mixed_batch(layer);
  pb.q_lens = {3, 1};
  pb.seq_lens = {3, 17};
  expect_matches_dense(pb, "MLA 576/512 fp8");
}

TEST(ReferenceFeatures, ComputeAndCacheDtypes) {
  struct Combo {
    DType dtype;
    KvCacheDType kv;
  };
  const Combo combos[] = {
      {DType::kFloat16, KvCacheDType::kAuto},     {DType::kBFloat16, KvCacheDType::kAuto},
      {DType::kFloat32, KvCacheDType::kFloat16},  {DType::kFloat32, KvCacheDType::kBFloat16},
      {DType::kBFloat16, KvCacheDType::kFloat32}, {DType::kFloat16, KvCacheDType::kFp8E4M3},
      {DType::kBFloat16, KvCacheDType::kFp8E5M2}, {DType::kFloat32, KvCacheDType::kFp8E4M3},
  };
  for (const Combo& c : combos) {
    AttentionLayerParams layer = base_layer();
    layer.dtype = c.dtype;
    layer.kv_cache_dtype = c.kv;
    layer.k_scale = 0.02f;  // fp8: values up to 1 use the top of e4m3's range
    layer.v_scale = 0.5f;
    expect_matches_dense(mixed_batch(layer),
                         std::string(to_string(c.dtype)) + " kv " + std::string(to_string(c.kv)));
  }
}

TEST(ReferenceFeatures, HndLayoutAndBlockSizes) {
  for (KvLayout layout : {KvLayout::kNHD, KvLayout::kHND}) {
    for (int block_size : {1, 5, 16, 64}) {
      PagedProblem pb = mixed_batch(base_layer());
      pb.layout = layout;
      pb.block_size = block_size;
      expect_matches_dense(pb,
                           std::string(to_string(layout)) + " block " + std::to_string(block_size));
    }
  }
}

}  // namespace
}  // namespace attnkit::testing
