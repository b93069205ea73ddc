// CUDA_MLA on the host (runs in CI, no GPU): declared capabilities and the reasons it
// gives, the "not built into this binary" path of a build without CUDA, its place in the
// registry and in selection for DeepSeek-V2-Lite, the kernels' shared-memory budget, and
// the per-step plan (rows = (token, head) pairs, split-KV, causal and windowed key ranges,
// metadata errors).

#include "backends/cuda_mla/cuda_mla_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "attnkit/build_config.h"
#include "attnkit/core/error.h"
#include "attnkit/core/platform.h"
#include "attnkit/explain/explain.h"
#include "attnkit/model/model_loader.h"
#include "attnkit/registry/registry.h"
#include "backends/cuda_mla/cuda_mla_backend.h"
#include "backends/cuda_mla/mla_config_choice.h"
#include "backends/cuda_mla/mla_geometry.h"

namespace attnkit {
namespace {

using cuda::CudaPlan;
using cuda::CudaWorkItem;

bool mentions(const std::vector<std::string>& reasons, const std::string& text) {
  for (const auto& r : reasons) {
    if (r.find(text) != std::string::npos) return true;
  }
  return false;
}

SelectorConfig deepseek_config() {
  SelectorConfig c;
  c.head_size = 576;
  c.head_size_v = 512;
  c.num_heads = 16;
  c.num_kv_heads = 1;
  c.use_mla = true;
  c.mla_rope_dim = 64;
  c.dtype = DType::kBFloat16;
  return c;
}

AttentionLayerParams mla_layer(int heads) {
  AttentionLayerParams layer;
  layer.kind = KvCacheKind::kMlaAttention;
  layer.num_heads = heads;
  layer.num_kv_heads = 1;
  layer.head_size = 576;
  layer.head_size_v = 512;
  layer.use_mla = true;
  layer.mla_rope_dim = 64;
  layer.scale = 0.072f;
  layer.dtype = DType::kBFloat16;
  return layer;
}

// Common metadata of (q_len, seq_len) requests with an identity block table.
CommonAttentionMetadata batch(const std::vector<std::pair<int, int>>& reqs, int block_size = 64) {
  CommonAttentionMetadata m;
  m.num_reqs = static_cast<int>(reqs.size());
  m.block_size = block_size;
  m.query_start_loc = {0};
  for (auto [q, k] : reqs) {
    m.query_start_loc.push_back(m.query_start_loc.back() + q);
    m.seq_lens.push_back(k);
    m.max_blocks_per_req = std::max(m.max_blocks_per_req, (k + block_size - 1) / block_size);
    m.max_query_len = std::max(m.max_query_len, q);
    m.max_seq_len = std::max(m.max_seq_len, k);
  }
  m.num_actual_tokens = m.query_start_loc.back();
  m.block_table.assign(reqs.size() * static_cast<size_t>(m.max_blocks_per_req), 0);
  for (size_t i = 0; i < m.block_table.size(); ++i) m.block_table[i] = static_cast<int32_t>(i);
  return m;
}

std::vector<CudaWorkItem> all_items(const CudaPlan& plan) {
  std::vector<CudaWorkItem> items = plan.small_items;
  items.insert(items.end(), plan.large_items.begin(), plan.large_items.end());
  return items;
}

// Every (request, row) must see its keys exactly once over the items (splits included),
// and every split item must point at a distinct partial slot.
void expect_rows_cover_keys(const CudaPlan& plan, const CommonAttentionMetadata& m, int heads) {
  std::map<std::pair<int, int>, std::vector<std::pair<int, int>>> ranges;  // (seq, row) -> keys
  for (const CudaWorkItem& it : all_items(plan)) {
    EXPECT_EQ(it.kv_begin % cuda_mla::kKvTile, 0) << "split starts on a tile boundary";
    for (int r = it.row_begin; r < it.row_end; ++r) {
      ranges[{it.seq, r}].push_back({it.kv_begin, it.kv_end});
    }
  }
  for (int i = 0; i < m.num_reqs; ++i) {
    const int q_len =
        m.query_start_loc[static_cast<size_t>(i) + 1] - m.query_start_loc[static_cast<size_t>(i)];
    for (int r = 0; r < q_len * heads; ++r) {
      auto pieces = ranges[{i, r}];
      ASSERT_FALSE(pieces.empty()) << "request " << i << " row " << r << " has no item";
      std::sort(pieces.begin(), pieces.end());
      int next = pieces.front().first;
      EXPECT_EQ(next, 0) << "causal without window starts at key 0";
      for (auto [b, e] : pieces) {
        EXPECT_EQ(b, next) << "request " << i << " row " << r
                           << ": keys split with a gap or overlap";
        next = e;
      }
      const int pos = m.seq_lens[static_cast<size_t>(i)] - q_len + r / heads;
      EXPECT_GE(next, pos + 1) << "row " << r << " must see its own position";
      EXPECT_LE(next, m.seq_lens[static_cast<size_t>(i)]);
    }
  }
}

TEST(CudaMlaCapabilities, DeclaresExactlyTheMlaKernels) {
  const auto backend = make_cuda_mla_backend();
  EXPECT_EQ(backend->name(), "CUDA_MLA");
  const BackendCapabilities& caps = backend->capabilities();
  EXPECT_EQ(caps.platform, PlatformKind::kCuda);
  EXPECT_EQ(caps.min_compute_capability, 80);
  EXPECT_TRUE(caps.mla && caps.mla_only);
  EXPECT_EQ(caps.head_sizes.describe(), SizeRule::list({576}).describe());
  EXPECT_EQ(caps.dtypes, (std::vector<DType>{DType::kFloat16, DType::kBFloat16}));
  EXPECT_EQ(caps.kv_cache_dtypes,
            (std::vector<KvCacheDType>{KvCacheDType::kFloat16, KvCacheDType::kBFloat16,
                                       KvCacheDType::kFp8E4M3}));
  EXPECT_EQ(caps.preferred_block_size, 64);
  EXPECT_TRUE(caps.sliding_window);
  EXPECT_FALSE(caps.chunked_local || caps.sinks || caps.soft_cap || caps.non_causal);
  EXPECT_EQ(caps.attention_types, (std::vector<AttentionType>{AttentionType::kDecoder}));
}

TEST(CudaMlaCapabilities, ServesDeepSeekOnAmpereAndHopper) {
  const auto backend = make_cuda_mla_backend();
  for (const char* platform : {"cuda:8.0", "cuda:9.0"}) {
    for (KvCacheDType kv : {KvCacheDType::kAuto, KvCacheDType::kBFloat16, KvCacheDType::kFp8E4M3}) {
      for (int block : {1, 16, 64, 128}) {
        SelectorConfig c = deepseek_config();
        c.kv_cache_dtype = kv;
        c.block_size = block;
        EXPECT_TRUE(backend->validate(c, parse_platform(platform)).empty())
            << platform << " " << to_string(kv) << " block " << block;
      }
    }
    SelectorConfig window = deepseek_config();
    window.sliding_window = 4096;
    window.dtype = DType::kFloat16;
    EXPECT_TRUE(backend->validate(window, parse_platform(platform)).empty()) << platform;
  }
}

TEST(CudaMlaCapabilities, RejectionsNameTheValue) {
  const auto backend = make_cuda_mla_backend();
  const Platform h200 = parse_platform("cuda:9.0");
  SelectorConfig plain;  // a standard (non-MLA) layer
  plain.head_size = plain.head_size_v = 128;
  EXPECT_FALSE(backend->validate(plain, h200).empty());

  SelectorConfig fp16_cache = deepseek_config();
  fp16_cache.kv_cache_dtype = KvCacheDType::kFloat16;  // compute bf16
  EXPECT_TRUE(mentions(backend->validate(fp16_cache, h200), "kv_cache_dtype float16"));
  SelectorConfig e5m2 = deepseek_config();
  e5m2.kv_cache_dtype = KvCacheDType::kFp8E5M2;
  EXPECT_TRUE(mentions(backend->validate(e5m2, h200), "fp8_e5m2"));
  SelectorConfig fp32 = deepseek_config();
  fp32.dtype = DType::kFloat32;
  EXPECT_TRUE(mentions(backend->validate(fp32, h200), "float32"));
  SelectorConfig rank = deepseek_config();
  rank.head_size_v = 256;
  EXPECT_TRUE(mentions(backend->validate(rank, h200), "head_size_v (kv_lora_rank) 256"));
  SelectorConfig rope = deepseek_config();
  rope.mla_rope_dim = 32;
  EXPECT_TRUE(mentions(backend->validate(rope, h200), "rope dim 32"));
  SelectorConfig heads = deepseek_config();
  heads.num_kv_heads = 2;
  EXPECT_TRUE(mentions(backend->validate(heads, h200), "num_kv_heads 2"));
  SelectorConfig sinks = deepseek_config();
  sinks.has_sinks = true;
  EXPECT_FALSE(backend->validate(sinks, h200).empty());
  EXPECT_FALSE(backend->validate(deepseek_config(), parse_platform("cuda:7.5")).empty());
  EXPECT_FALSE(backend->validate(deepseek_config(), parse_platform("cpu")).empty());
}

TEST(CudaMlaCapabilities, LayersItCannotRunAreRefusedByMakeImpl) {
  const auto backend = make_cuda_mla_backend();
  AttentionLayerParams not_mla = mla_layer(16);
  not_mla.use_mla = false;
  AttentionLayerParams e5m2 = mla_layer(16);
  e5m2.kv_cache_dtype = KvCacheDType::kFp8E5M2;
  AttentionLayerParams sinks = mla_layer(16);
  sinks.sinks.assign(16, 0.5f);
  for (const AttentionLayerParams& layer : {not_mla, e5m2, sinks}) {
    try {
      backend->make_impl(layer);
      ADD_FAILURE() << "make_impl accepted an unsupported layer";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kUnsupported) << e.what();
      EXPECT_NE(std::string(e.what()).find("CUDA_MLA"), std::string::npos) << e.what();
    }
  }
}

TEST(CudaMlaCapabilities, WithoutCudaItIsRegisteredButNotBuilt) {
  if (ATTNKIT_HAS_CUDA) GTEST_SKIP() << "this build has CUDA";
  const auto backend = global_registry().get("CUDA_MLA");
  ASSERT_NE(backend, nullptr);
  const auto why = backend->binary_reason(parse_platform("cuda:9.0"));
  ASSERT_TRUE(why.has_value());
  EXPECT_NE(why->find("not built into this binary"), std::string::npos) << *why;
  for (int which = 0; which < 2; ++which) {
    try {
      if (which == 0) {
        backend->make_builder(KvCacheSpec{}, mla_layer(16));
      } else {
        backend->make_impl(mla_layer(16));
      }
      ADD_FAILURE() << "a build without CUDA made a CUDA_MLA " << (which ? "impl" : "builder");
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
      EXPECT_NE(std::string(e.what()).find("not built into this binary"), std::string::npos)
          << e.what();
    }
  }
}

TEST(CudaMlaSelection, DeepSeekV2LiteMlaLayersGetCudaMlaOnHopper) {
  ExplainRequest request;
  request.platform = parse_platform("cuda:9.0");
  const Explanation e = explain(load_model("deepseek-v2-lite"), request);
  int mla_layers = 0;
  for (const LayerOutcome& l : e.layers) {
    if (!l.selection) continue;
    ++mla_layers;
    EXPECT_EQ(l.selection->backend, "CUDA_MLA") << "layer " << l.layer.index;
  }
  EXPECT_EQ(mla_layers, 27);
  ASSERT_EQ(e.kv_cache.groups.size(), 1u);
  EXPECT_EQ(e.kv_cache.groups[0].spec.block_size, 64);  // CUDA_MLA's preferred page
}

TEST(CudaMlaGeometry, SharedMemoryFitsAmpereAndTwoSmallCtasFitHopper) {
  EXPECT_LE(cuda_mla::MlaLargeConfig::kSmemBytes, cuda_mla::kSm80MaxSmemBytes);
  EXPECT_LE(cuda_mla::MlaSmallConfig::kSmemBytes, cuda_mla::kSm80MaxSmemBytes);
  // sm_90: 228 KiB per SM, 1 KiB of it reserved per CTA.
  EXPECT_LE(2 * (cuda_mla::MlaSmallConfig::kSmemBytes + 1024), 228u * 1024u);
  EXPECT_EQ(cuda_mla::MlaSmallConfig::kRows, 16);
  EXPECT_EQ(cuda_mla::MlaLargeConfig::kRows, 64);
}

TEST(CudaMlaGeometry, Sm90LargeConfigNeedsHopperSharedMemoryAndMatchesThePlannersRows) {
  using Sm90 = cuda_mla::MlaLargeSm90Config;
  EXPECT_TRUE(Sm90::kSm90Only);
  EXPECT_FALSE(cuda_mla::MlaLargeConfig::kSm90Only);
  // Too big for sm_80 (that is why the launcher checks the device), one CTA per sm_90 SM.
  EXPECT_GT(Sm90::kSmemBytes, cuda_mla::kSm80MaxSmemBytes);
  EXPECT_LE(Sm90::kSmemBytes, cuda_mla::kSm90MaxSmemBytes);
  EXPECT_EQ(Sm90::kCtasPerSm90, 1);
  EXPECT_EQ(Sm90::kRows, cuda_mla::MlaLargeConfig::kRows);
  // Each S-phase warp: 32 rows x all 32 keys x 9 of the 36 k16 steps.
  EXPECT_EQ(Sm90::kSWarpMTiles * 16, 32);
  EXPECT_EQ(Sm90::kSliceKeys, cuda_mla::kKvTile);
  EXPECT_EQ(Sm90::kKSteps, 9);
  EXPECT_EQ(Sm90::kSBuffers, 4);
  EXPECT_TRUE(Sm90::kOverlap);
  EXPECT_EQ(Sm90::kStages, 3);
  EXPECT_FALSE(cuda_mla::MlaLargeConfig::kOverlap);
  EXPECT_FALSE(cuda_mla::MlaSmallConfig::kOverlap);
}

TEST(CudaMlaGeometry, Fp8RegisterPipelineCoversATileEvenly) {
  // 32 keys x 576 bytes in 8-byte loads over 256 threads: 9 loads each.
  EXPECT_EQ(cuda_mla::MlaSmallConfig::kFp8Loads, 9);
  EXPECT_EQ(cuda_mla::MlaSmallConfig::kFp8Depth, 2);
  EXPECT_EQ(cuda_mla::MlaLargeConfig::kFp8Depth, 1);
  EXPECT_EQ(cuda_mla::MlaLargeSm90Config::kFp8Depth, 1);
}

TEST(CudaMlaGeometry, LargeRowConfigChoiceIsProcessWideAndResettable) {
  EXPECT_EQ(cuda_mla::large_row_config(), cuda_mla::LargeRowConfig::kAuto);
  cuda_mla::set_large_row_config(cuda_mla::LargeRowConfig::kSm80);
  EXPECT_EQ(cuda_mla::large_row_config(), cuda_mla::LargeRowConfig::kSm80);
  cuda_mla::set_large_row_config(cuda_mla::LargeRowConfig::kAuto);
  EXPECT_EQ(cuda_mla::large_row_config(), cuda_mla::LargeRowConfig::kAuto);
}

TEST(CudaMlaPlan, DecodeWithManyHeadsPacksHeadsIntoLargeRowTiles) {
  const AttentionLayerParams layer = mla_layer(128);
  const CommonAttentionMetadata m = batch({{1, 4096}, {1, 4096}, {1, 100}, {1, 1}});
  const CudaPlan plan = cuda_mla::plan_mla_step(layer, m, 132);
  EXPECT_TRUE(plan.small_items.empty());
  // 128 heads of one token = 128 rows = two 64-row tiles per request.
  for (const CudaWorkItem& it : plan.large_items) {
    EXPECT_TRUE(it.row_begin == 0 || it.row_begin == 64) << it.row_begin;
    EXPECT_EQ(it.row_end - it.row_begin, 64);
  }
  expect_rows_cover_keys(plan, m, 128);
  // Few CTAs for 132 SMs: the long requests are split, and every split token has a
  // combine item over consecutive partial slots.
  int max_splits = 1;
  for (const CudaWorkItem& it : plan.large_items) max_splits = std::max(max_splits, it.num_splits);
  EXPECT_GT(max_splits, 1);
  EXPECT_FALSE(plan.combine_items.empty());
  for (const auto& c : plan.combine_items) {
    EXPECT_GT(c.num_splits, 1);
    EXPECT_LE(c.slot_begin + c.num_splits, plan.num_partial_slots);
  }
}

TEST(CudaMlaPlan, DecodeWithSixteenHeadsUsesSmallRowTiles) {
  const AttentionLayerParams layer = mla_layer(16);
  const CommonAttentionMetadata m = batch({{1, 8192}, {1, 33}, {1, 50}});
  const CudaPlan plan = cuda_mla::plan_mla_step(layer, m, 132);
  EXPECT_TRUE(plan.large_items.empty());
  for (const CudaWorkItem& it : plan.small_items) {
    EXPECT_EQ(it.row_begin, 0);
    EXPECT_LE(it.row_end, 16);
  }
  expect_rows_cover_keys(plan, m, 16);
}

TEST(CudaMlaPlan, SplitKvFillsWholeWaves) {
  // The benchmark's decode shapes on an H200 (132 SMs): whatever the split, the last wave
  // of CTAs is (nearly) full, and a request is split only as far as that needs.
  for (int heads : {128, 16}) {
    for (int batch_size : {64, 128, 300}) {
      for (int context : {4096, 8192}) {
        const std::vector<std::pair<int, int>> reqs(static_cast<size_t>(batch_size), {1, context});
        const CommonAttentionMetadata m = batch(reqs);
        const CudaPlan plan = cuda_mla::plan_mla_step(mla_layer(heads), m, 132);
        EXPECT_GE(cuda_mla::wave_efficiency(plan, 132), 0.9)
            << heads << " heads, batch " << batch_size << ", context " << context;
        EXPECT_LE(plan.small_items.size() + plan.large_items.size(), 8u * 2u * 132u);  // 8 waves
        expect_rows_cover_keys(plan, m, heads);
      }
    }
  }
}

TEST(CudaMlaPlan, PrefillTilesFollowTheCausalDiagonal) {
  const AttentionLayerParams layer = mla_layer(16);
  const CommonAttentionMetadata m = batch({{100, 1000}});
  const CudaPlan plan = cuda_mla::plan_mla_step(layer, m, 132);
  // 100 tokens x 16 heads = 1600 rows = 25 tiles of 64 rows (4 tokens each).
  int unsplit_tiles = 0;
  for (const CudaWorkItem& it : plan.large_items) {
    if (it.split == 0) ++unsplit_tiles;
    const int last_token = (it.row_end - 1) / 16;
    if (it.split + 1 == it.num_splits) {
      EXPECT_EQ(it.kv_end, 900 + last_token + 1) << "tile rows " << it.row_begin;
    }
  }
  EXPECT_EQ(unsplit_tiles, 25);
  expect_rows_cover_keys(plan, m, 16);
}

TEST(CudaMlaPlan, SlidingWindowSkipsKeysNoRowSees) {
  AttentionLayerParams layer = mla_layer(16);
  layer.kind = KvCacheKind::kSlidingWindowMla;
  layer.sliding_window = 256;
  const CudaPlan plan = cuda_mla::plan_mla_step(layer, batch({{1, 5000}}), 132);
  int lo = 1 << 30, hi = 0;
  for (const CudaWorkItem& it : all_items(plan)) {
    lo = std::min(lo, it.kv_begin);
    hi = std::max(hi, it.kv_end);
  }
  EXPECT_EQ(lo, 5000 - 256);
  EXPECT_EQ(hi, 5000);
}

TEST(CudaMlaPlan, BadMetadataIsAnErrorNamingTheField) {
  const AttentionLayerParams layer = mla_layer(16);
  auto expect_error = [&](const CommonAttentionMetadata& m, const std::string& text) {
    try {
      cuda_mla::plan_mla_step(layer, m, 132);
      ADD_FAILURE() << "accepted bad metadata (" << text << ")";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  };
  CommonAttentionMetadata more_queries = batch({{1, 100}, {5, 4}});
  expect_error(more_queries, "q_len 5");
  CommonAttentionMetadata narrow = batch({{1, 100}});
  narrow.seq_lens[0] = 200;  // needs 4 blocks of 64, the table has 2
  expect_error(narrow, "max_blocks_per_req is 2");
  CommonAttentionMetadata no_pages = batch({{1, 100}});
  no_pages.block_size = 0;
  expect_error(no_pages, "block_size");
  CommonAttentionMetadata ragged = batch({{1, 100}, {1, 100}});
  ragged.query_start_loc = {0, 2, 1};
  expect_error(ragged, "query_start_loc");
}

}  // namespace
}  // namespace attnkit
