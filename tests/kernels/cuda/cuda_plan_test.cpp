// Planning of the CUDA kernels' work (CPU only, runs in CI): every query row is covered by
// exactly one row tile, the splits of an item partition its visible key range, partial
// slots are distinct, and split-KV kicks in only when the grid would be too small.

#include "kernels/cuda/cuda_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include "attnkit/core/error.h"

namespace attnkit::cuda {
namespace {

PlanShape decode_shape() {
  PlanShape s;
  s.num_heads = 32;
  s.num_kv_heads = 8;
  s.num_sms = 132;
  s.small_rows = 16;
  s.large_rows = 128;
  s.kv_tile = 64;
  return s;
}

std::vector<int32_t> starts(const std::vector<int>& q_lens) {
  std::vector<int32_t> qsl{0};
  for (int q : q_lens) qsl.push_back(qsl.back() + q);
  return qsl;
}

// Checks the structural invariants of any plan.
void expect_valid_plan(const PlanShape& shape, const std::vector<int>& q_lens,
                       const std::vector<int32_t>& seq_lens, const CudaPlan& plan) {
  const int group = shape.num_heads / shape.num_kv_heads;
  // (seq, row) -> list of (kv_begin, kv_end) pieces.
  std::map<std::pair<int, int>, std::vector<std::pair<int, int>>> pieces;
  std::set<std::pair<int, int>> slots;  // (slot, row % group) used by split items
  auto visit = [&](const CudaWorkItem& it, int max_rows) {
    EXPECT_LE(it.row_end - it.row_begin, max_rows);
    EXPECT_LE(it.kv_begin, it.kv_end);
    EXPECT_GE(it.kv_begin, 0);
    EXPECT_LE(it.kv_end, it.kv_len);
    for (int r = it.row_begin; r < it.row_end; ++r) {
      pieces[{it.seq, r}].push_back({it.kv_begin, it.kv_end});
      if (it.num_splits > 1) {
        const int slot = it.partial_base + (r / group) * it.num_splits + it.split;
        EXPECT_LT(slot, plan.num_partial_slots);
        EXPECT_TRUE(slots.insert({slot, r % group}).second) << "slot reused: " << slot;
      }
    }
  };
  for (const auto& it : plan.small_items) visit(it, shape.small_rows);
  for (const auto& it : plan.large_items) visit(it, shape.large_rows);
  // Split groups (merged in place by the last split's CTA): dense ids, one group holds
  // exactly the num_splits pieces of one (seq, rows) item.
  std::map<int, std::vector<CudaWorkItem>> groups;
  for (const auto* list : {&plan.small_items, &plan.large_items}) {
    for (const auto& it : *list) {
      if (it.num_splits <= 1) {
        EXPECT_EQ(it.split_group, -1);
        continue;
      }
      EXPECT_GE(it.split_group, 0);
      EXPECT_LT(it.split_group, plan.num_split_groups);
      groups[it.split_group].push_back(it);
    }
  }
  EXPECT_EQ(static_cast<int>(groups.size()), plan.num_split_groups);
  for (const auto& [id, items] : groups) {
    ASSERT_EQ(static_cast<int>(items.size()), items.front().num_splits) << "group " << id;
    std::set<int> splits;
    for (const auto& it : items) {
      EXPECT_EQ(it.seq, items.front().seq);
      EXPECT_EQ(it.row_begin, items.front().row_begin);
      EXPECT_EQ(it.row_end, items.front().row_end);
      EXPECT_EQ(it.num_splits, items.front().num_splits);
      splits.insert(it.split);
    }
    EXPECT_EQ(static_cast<int>(splits.size()), items.front().num_splits);
  }
  for (size_t i = 0; i < q_lens.size(); ++i) {
    for (int r = 0; r < q_lens[i] * group; ++r) {
      auto found = pieces.find({static_cast<int>(i), r});
      ASSERT_NE(found, pieces.end()) << "request " << i << " row " << r << " not covered";
      auto ranges = found->second;
      std::sort(ranges.begin(), ranges.end());
      // The pieces tile the range of the row's item without gaps or overlap.
      for (size_t k = 1; k < ranges.size(); ++k) {
        if (ranges[k].first == ranges[k].second) continue;  // empty trailing split
        EXPECT_EQ(ranges[k].first, ranges[k - 1].second) << "gap in request " << i;
      }
      const int q_len = q_lens[i];
      const int kv_len = seq_lens[i];
      const int pos = kv_len - q_len + r / group;
      // Every key the row may see lies inside the covered range.
      int lo = 0;
      int hi = shape.causal ? pos + 1 : kv_len;
      if (shape.causal && shape.sliding_window > 0)
        lo = std::max(0, pos - shape.sliding_window + 1);
      if (shape.causal && shape.chunk_size > 0) {
        lo = std::max(lo, pos / shape.chunk_size * shape.chunk_size);
      }
      EXPECT_LE(ranges.front().first, lo);
      EXPECT_GE(ranges.back().second, hi);
    }
  }
  for (const auto& c : plan.combine_items) {
    EXPECT_GT(c.num_splits, 1);
    EXPECT_LE(c.slot_begin + c.num_splits, plan.num_partial_slots);
  }
}

TEST(CudaPlan, LargeDecodeBatchIsNotSplit) {
  const PlanShape shape = decode_shape();
  std::vector<int> q(128, 1);
  std::vector<int32_t> kv(128, 1024);
  const CudaPlan plan = plan_work(shape, starts(q), kv);
  EXPECT_EQ(plan.small_items.size(), 128u);  // 4 GQA heads x 1 token = 4 rows: one item
  EXPECT_TRUE(plan.large_items.empty());
  EXPECT_TRUE(plan.combine_items.empty());
  EXPECT_EQ(plan.num_partial_slots, 0);
  expect_valid_plan(shape, q, kv, plan);
}

TEST(CudaPlan, SingleLongDecodeIsSplitToFillTheGpu) {
  const PlanShape shape = decode_shape();
  std::vector<int> q{1};
  std::vector<int32_t> kv{16384};
  const CudaPlan plan = plan_work(shape, starts(q), kv);
  ASSERT_GT(plan.small_items.size(), 8u);
  const int splits = plan.small_items.front().num_splits;
  EXPECT_EQ(static_cast<int>(plan.small_items.size()), splits);
  // 8 KV heads x splits CTAs reach about the target without going below min_split_len.
  EXPECT_GE(splits * shape.num_kv_heads, 4 * shape.num_sms / 2);
  EXPECT_GE(16384 / splits, shape.min_split_len - shape.kv_tile);
  ASSERT_EQ(plan.combine_items.size(), 1u);
  EXPECT_EQ(plan.combine_items[0].num_splits, splits);
  EXPECT_EQ(plan.num_partial_slots, splits);
  expect_valid_plan(shape, q, kv, plan);
}

TEST(CudaPlan, RoundedSplitCountKeepsANearlyFullGridInOneWave) {
  // 64 requests x 8 KV heads = 512 CTAs against a one-wave target of 528: rounding the
  // split count up would cut every request in two (1024 CTAs, two waves and a merge).
  PlanShape shape = decode_shape();
  shape.num_heads = 64;
  shape.num_kv_heads = 8;
  shape.target_ctas = 4 * shape.num_sms;
  shape.round_splits = true;
  std::vector<int> q(64, 1);
  std::vector<int32_t> kv(64, 4096);
  CudaPlan plan = plan_work(shape, starts(q), kv);
  EXPECT_EQ(plan.small_items.size(), 64u);
  EXPECT_EQ(plan.num_partial_slots, 0);
  expect_valid_plan(shape, q, kv, plan);
  shape.round_splits = false;
  plan = plan_work(shape, starts(q), kv);
  EXPECT_EQ(plan.small_items.size(), 128u);
  expect_valid_plan(shape, q, kv, plan);
  // A quarter of the target still splits: 16 requests x 8 heads -> 2 splits each.
  shape.round_splits = true;
  shape.target_ctas = 2 * shape.num_sms;
  std::vector<int> q16(16, 1);
  std::vector<int32_t> kv16(16, 4096);
  plan = plan_work(shape, starts(q16), kv16);
  EXPECT_EQ(plan.small_items.size(), 32u);
  EXPECT_EQ(plan.small_items.front().num_splits, 2);
  expect_valid_plan(shape, q16, kv16, plan);
}

TEST(CudaPlan, PrefillRowsAreTiledAndLongestTilesComeFirst) {
  PlanShape shape = decode_shape();
  shape.num_heads = 16;
  shape.num_kv_heads = 16;
  shape.num_sms = 16;  // 32 tiles x 16 heads fill this GPU: no split-KV
  std::vector<int> q{2048, 2048};
  std::vector<int32_t> kv{2048, 2048};
  const CudaPlan plan = plan_work(shape, starts(q), kv);
  EXPECT_TRUE(plan.small_items.empty());
  EXPECT_EQ(plan.large_items.size(), 32u);  // 2048 rows / 128 per tile, two requests
  for (size_t i = 1; i < plan.large_items.size(); ++i) {
    EXPECT_GE(plan.large_items[i - 1].kv_end - plan.large_items[i - 1].kv_begin,
              plan.large_items[i].kv_end - plan.large_items[i].kv_begin);
  }
  // Causal: the last tile of a request sees every key, the first only its own 128.
  EXPECT_EQ(plan.large_items.front().kv_end, 2048);
  EXPECT_EQ(plan.large_items.back().kv_end, 128);
  expect_valid_plan(shape, q, kv, plan);
}

TEST(CudaPlan, SlidingWindowAndChunksNarrowTheKeyRange) {
  PlanShape shape = decode_shape();
  shape.sliding_window = 100;
  const KeySpan w = visible_key_range(shape, 1, 5000, 0, 4);
  EXPECT_EQ(w.begin, 5000 - 100);
  EXPECT_EQ(w.end, 5000);
  shape.sliding_window = 0;
  shape.chunk_size = 256;
  const KeySpan c = visible_key_range(shape, 1, 1000, 0, 4);
  EXPECT_EQ(c.begin, 768);
  EXPECT_EQ(c.end, 1000);
  shape.causal = false;
  const KeySpan n = visible_key_range(shape, 7, 33, 0, 28);
  EXPECT_EQ(n.begin, 0);
  EXPECT_EQ(n.end, 33);
}

TEST(CudaPlan, RandomMixedBatchesKeepEveryInvariant) {
  std::mt19937 rng(std::random_device{}());
  for (int trial = 0; trial < 200; ++trial) {
    PlanShape shape = decode_shape();
    const int kv_heads = 1 << (rng() % 4);
    shape.num_kv_heads = kv_heads;
    shape.num_heads = kv_heads * (1 + static_cast<int>(rng() % 8));
    shape.causal = rng() % 4 != 0;
    shape.sliding_window = rng() % 3 == 0 ? 1 + static_cast<int>(rng() % 700) : 0;
    shape.chunk_size = rng() % 4 == 0 ? 16 * (1 + static_cast<int>(rng() % 40)) : 0;
    shape.num_sms = 1 + static_cast<int>(rng() % 200);
    const int reqs = 1 + static_cast<int>(rng() % 12);
    std::vector<int> q;
    std::vector<int32_t> kv;
    for (int i = 0; i < reqs; ++i) {
      const int kv_len = static_cast<int>(rng() % 5000);
      int q_len = rng() % 2 == 0 ? std::min(kv_len, 1) : static_cast<int>(rng() % (kv_len + 1));
      if (!shape.causal) q_len = static_cast<int>(rng() % 300);
      q.push_back(q_len);
      kv.push_back(kv_len);
    }
    const CudaPlan plan = plan_work(shape, starts(q), kv);
    SCOPED_TRACE("trial " + std::to_string(trial));
    expect_valid_plan(shape, q, kv, plan);
  }
}

TEST(CudaPlan, InconsistentMetadataIsRejectedWithTheRequestNamed) {
  const PlanShape shape = decode_shape();
  try {
    plan_work(shape, {0, 1, 9}, {5, 4});
    FAIL() << "q_len 8 > seq_len 4 accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("request 1"), std::string::npos) << e.what();
  }
  EXPECT_THROW(plan_work(shape, {0, 1}, {5, 4}), Error);
  PlanShape bad = shape;
  bad.num_heads = 30;
  EXPECT_THROW(plan_work(bad, {0, 1}, {5}), Error);
}

}  // namespace
}  // namespace attnkit::cuda
