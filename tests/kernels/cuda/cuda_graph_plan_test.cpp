// Graph-shaped planning and reserved bounds of the CUDA work planner (CPU only, runs in CI):
//   - with fixed_splits, a plan's item, combine and slot counts depend only on the batch's
//     shape (request count and query tokens), never on the sequence lengths, and the pieces
//     still cover every request's keys;
//   - max_partial_slots bounds the partial results of any step;
//   - plan_bounds() holds for random steps within the StepLimits it was made for, and
//     upload_capacity() holds their uploads (the reserved buffers never overflow).

#include <gtest/gtest.h>

#include <random>

#include "kernels/cuda/cuda_plan.h"
#include "kernels/cuda/plan_upload.h"

namespace attnkit::cuda {
namespace {

PlanShape shape_of(int heads, int kv_heads, int small_rows, int large_rows) {
  PlanShape s;
  s.num_heads = heads;
  s.num_kv_heads = kv_heads;
  s.num_sms = 132;
  s.small_rows = small_rows;
  s.large_rows = large_rows;
  s.kv_tile = 64;
  s.target_ctas = 2 * 132;
  return s;
}

std::vector<int32_t> uniform_starts(int reqs, int q_len) {
  std::vector<int32_t> qsl{0};
  for (int i = 0; i < reqs; ++i) qsl.push_back(qsl.back() + q_len);
  return qsl;
}

size_t items(const CudaPlan& p) { return p.small_items.size() + p.large_items.size(); }

TEST(CudaGraphPlan, FixedSplitsMakeCountsIndependentOfSequenceLengths) {
  std::mt19937 rng(std::random_device{}());
  for (auto [heads, kv_heads, q_len] : {std::tuple{32, 8, 1}, {16, 4, 4}, {16, 1, 1}}) {
    PlanShape shape = shape_of(heads, kv_heads, 16, 64);
    const int reqs = 5;
    const std::vector<int32_t> qsl = uniform_starts(reqs, q_len);
    shape.fixed_splits = max_split_count(plan_work(shape, qsl, uniform_seq_lens(qsl, 8192)));
    ASSERT_GT(shape.fixed_splits, 1) << "a small batch at 8192 keys should split";
    std::uniform_int_distribution<int> len(q_len, 8192);
    CudaPlan first;
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<int32_t> seq_lens;
      for (int i = 0; i < reqs; ++i) seq_lens.push_back(len(rng));
      const CudaPlan plan = plan_work(shape, qsl, seq_lens);
      for (const auto* list : {&plan.small_items, &plan.large_items}) {
        for (const CudaWorkItem& it : *list) EXPECT_EQ(it.num_splits, shape.fixed_splits);
      }
      // Each request's pieces cover its keys: the last non-empty piece ends at kv_len.
      for (int i = 0; i < reqs; ++i) {
        int covered = 0;
        for (const CudaWorkItem& it : plan.small_items) {
          if (it.seq == i) covered = std::max(covered, it.kv_end);
        }
        for (const CudaWorkItem& it : plan.large_items) {
          if (it.seq == i) covered = std::max(covered, it.kv_end);
        }
        EXPECT_EQ(covered, seq_lens[static_cast<size_t>(i)]);
      }
      if (trial == 0) {
        first = plan;
        continue;
      }
      EXPECT_EQ(plan.small_items.size(), first.small_items.size());
      EXPECT_EQ(plan.large_items.size(), first.large_items.size());
      EXPECT_EQ(plan.combine_items.size(), first.combine_items.size());
      EXPECT_EQ(plan.num_partial_slots, first.num_partial_slots);
      EXPECT_EQ(plan.num_split_groups, first.num_split_groups);
    }
  }
}

TEST(CudaGraphPlan, AdaptivePlansDependOnLengthsWhichIsWhyGraphsNeedFixedSplits) {
  const PlanShape shape = shape_of(32, 8, 16, 64);
  const std::vector<int32_t> qsl = uniform_starts(2, 1);
  EXPECT_NE(items(plan_work(shape, qsl, {64, 64})), items(plan_work(shape, qsl, {8192, 8192})));
}

TEST(CudaGraphPlan, MaxPartialSlotsBoundsEveryStep) {
  PlanShape shape = shape_of(32, 8, 16, 64);
  const std::vector<int32_t> qsl = uniform_starts(1, 1);
  const CudaPlan unbounded = plan_work(shape, qsl, {65536});
  ASSERT_GT(unbounded.num_partial_slots, 8);
  shape.max_partial_slots = 8;
  const CudaPlan bounded = plan_work(shape, qsl, {65536});
  EXPECT_LE(bounded.num_partial_slots, 8);
  EXPECT_GT(bounded.num_partial_slots, 0);
}

TEST(CudaGraphPlan, BoundsAndCapacityHoldForRandomStepsWithinTheLimits) {
  std::mt19937 rng(std::random_device{}());
  for (auto [heads, kv_heads, small_rows, large_rows] : {std::tuple{32, 8, 16, 64},
                                                         {64, 8, 16, 128},
                                                         {16, 1, 16, 64},
                                                         {8, 8, 4, 4},
                                                         {64, 8, 8, 8},
                                                         {12, 2, 8, 8}}) {
    PlanShape shape = shape_of(heads, kv_heads, small_rows, large_rows);
    const StepLimits limits{16, 512, 64, 64 * 16};
    shape.max_partial_slots = reserved_partial_slots(shape, limits);
    const PlanBounds bounds = plan_bounds(shape, limits);
    const UploadCapacity capacity = upload_capacity(
        bounds, limits, static_cast<size_t>(limits.max_num_tokens), heads, kv_heads, 128);
    for (int trial = 0; trial < 200; ++trial) {
      const int reqs = std::uniform_int_distribution<int>(1, limits.max_num_reqs)(rng);
      std::vector<int32_t> qsl{0}, seq_lens;
      int budget = limits.max_num_tokens;
      for (int i = 0; i < reqs; ++i) {
        const int remaining = reqs - i - 1;
        const int q = std::uniform_int_distribution<int>(1, std::max(1, budget - remaining))(rng);
        budget -= q;
        qsl.push_back(qsl.back() + q);
        seq_lens.push_back(std::uniform_int_distribution<int>(q, limits.max_seq_len)(rng));
      }
      const CudaPlan plan = plan_work(shape, qsl, seq_lens);
      EXPECT_LE(items(plan), bounds.items);
      EXPECT_LE(plan.combine_items.size(), bounds.combine_items);
      EXPECT_LE(static_cast<size_t>(plan.num_partial_slots), bounds.partial_slots);
      EXPECT_LE(static_cast<size_t>(plan.num_split_groups), bounds.split_groups);
      const size_t o_bytes = static_cast<size_t>(plan.num_partial_slots) * heads * 128 * 4;
      EXPECT_LE(o_bytes, capacity.workspace_bytes);
    }
  }
}

}  // namespace
}  // namespace attnkit::cuda
