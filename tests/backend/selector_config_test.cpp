#include "attnkit/backend/selector_config.h"

#include <gtest/gtest.h>

#include <set>

namespace attnkit {
namespace {

// The kind DESIGN.md gives each layer, written as a decision list independent of kind_of's
// code: attention type first, then MLA (with or without a window), window, chunk, static
// sink tokens. Learned sink logits never change the kind.
KvCacheKind expected_kind(AttentionType type, bool mla, bool window, bool chunk, bool sink_tokens) {
  if (type == AttentionType::kEncoder || type == AttentionType::kEncoderOnly) {
    return KvCacheKind::kEncoderOnlyAttention;
  }
  if (type == AttentionType::kEncoderDecoder) return KvCacheKind::kCrossAttention;
  if (mla && window) return KvCacheKind::kSlidingWindowMla;
  if (mla) return KvCacheKind::kMlaAttention;
  if (window) return KvCacheKind::kSlidingWindow;
  if (chunk) return KvCacheKind::kChunkedLocalAttention;
  if (sink_tokens) return KvCacheKind::kSinkFullAttention;
  return KvCacheKind::kFullAttention;
}

TEST(KindOf, EveryCombinationOfTypeAndFeatures) {
  std::set<KvCacheKind> reached;
  int combinations = 0;
  for (AttentionType type : all_values<AttentionType>()) {
    for (bool mla : {false, true}) {
      for (bool window : {false, true}) {
        for (bool chunk : {false, true}) {
          for (bool sink_tokens : {false, true}) {
            for (bool extras : {false, true}) {
              SelectorConfig c;
              c.attn_type = type;
              c.use_mla = mla;
              if (window) c.sliding_window = 4096;
              if (chunk) c.chunk_size = 8192;
              if (sink_tokens) c.sink_len = 4;
              // Soft-capping and learned sink logits never change the kind.
              if (extras) c.soft_cap = 50.0f;
              c.has_sinks = extras;
              const KvCacheKind kind = kind_of(c);
              EXPECT_EQ(kind, expected_kind(type, mla, window, chunk, sink_tokens))
                  << c.describe() << " -> " << to_string(kind);
              reached.insert(kind);
              ++combinations;
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(combinations, 4 * 32);
  EXPECT_EQ(reached.size(), 8u) << "every attention kind is reachable";
  SelectorConfig state;
  state.state = StateLayerDims{};
  EXPECT_EQ(kind_of(state), KvCacheKind::kMamba) << "and a state layer is mamba";
}

TEST(KindOf, NamedExamples) {
  SelectorConfig c;
  EXPECT_EQ(kind_of(c), KvCacheKind::kFullAttention);
  c.has_sinks = true;  // gpt-oss full-attention layers: learned sink logits, same kind
  EXPECT_EQ(kind_of(c), KvCacheKind::kFullAttention);
  c.sink_len = 4;  // static sink tokens held in the cache
  EXPECT_EQ(kind_of(c), KvCacheKind::kSinkFullAttention);
  c.sink_len = 0;
  c.sliding_window = 128;  // gpt-oss sliding layers (with sinks) stay sliding_window
  EXPECT_EQ(kind_of(c), KvCacheKind::kSlidingWindow);
  SelectorConfig llama4;
  llama4.chunk_size = 8192;
  EXPECT_EQ(kind_of(llama4), KvCacheKind::kChunkedLocalAttention);
  SelectorConfig deepseek;
  deepseek.use_mla = true;
  EXPECT_EQ(kind_of(deepseek), KvCacheKind::kMlaAttention);
  deepseek.sliding_window = 1024;
  EXPECT_EQ(kind_of(deepseek), KvCacheKind::kSlidingWindowMla);
}

TEST(SelectorConfig, CausalOnlyForDecoderSelfAttention) {
  SelectorConfig c;
  EXPECT_TRUE(c.is_causal());
  for (AttentionType t :
       {AttentionType::kEncoder, AttentionType::kEncoderOnly, AttentionType::kEncoderDecoder}) {
    c.attn_type = t;
    EXPECT_FALSE(c.is_causal()) << to_string(t);
  }
}

TEST(SelectorConfig, DescribeNamesEverySetFeature) {
  SelectorConfig c;
  c.head_size = 256;
  c.head_size_v = 256;
  EXPECT_EQ(c.describe(), "decoder head_size=256 bfloat16 kv=auto");
  c.head_size = 576;
  c.head_size_v = 512;
  c.dtype = DType::kFloat16;
  c.kv_cache_dtype = KvCacheDType::kFp8E4M3;
  c.use_mla = true;
  c.mla_rope_dim = 64;
  c.sliding_window = 512;
  c.chunk_size = 1024;
  c.has_sinks = true;
  c.soft_cap = 30.0f;
  c.block_size = 64;
  c.batch_invariant = true;
  c.kv_connector = true;
  EXPECT_EQ(c.describe(),
            "decoder head_size=576 head_size_v=512 float16 kv=fp8_e4m3 mla(rope=64) window=512 "
            "chunk=1024 sinks soft_cap=30 block_size=64 batch_invariant kv_connector");
}

TEST(SelectorConfig, EqualityCoversEveryField) {
  SelectorConfig a;
  SelectorConfig b;
  EXPECT_EQ(a, b);
  b.block_size = 16;
  EXPECT_NE(a, b);
  b = a;
  b.kv_connector = true;
  EXPECT_NE(a, b);
}

}  // namespace
}  // namespace attnkit
