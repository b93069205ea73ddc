#include "kernels/cuda/cuda_plan.h"

#include <algorithm>
#include <string>

#include "attnkit/core/error.h"

namespace attnkit::cuda {
namespace {

int ceil_div(int64_t a, int64_t b) { return static_cast<int>((a + b - 1) / b); }

void check_metadata(const PlanShape& shape, const std::vector<int32_t>& query_start_loc,
                    const std::vector<int32_t>& seq_lens) {
  if (shape.num_kv_heads <= 0 || shape.num_heads <= 0 ||
      shape.num_heads % shape.num_kv_heads != 0) {
    throw Error(ErrorCode::kInvalidArgument, "num_heads " + std::to_string(shape.num_heads) +
                                                 " is not a positive multiple of "
                                                 "num_kv_heads " +
                                                 std::to_string(shape.num_kv_heads));
  }
  if (query_start_loc.size() != seq_lens.size() + 1) {
    throw Error(ErrorCode::kInvalidArgument,
                "query_start_loc has " + std::to_string(query_start_loc.size()) +
                    " entries, expected num_reqs + 1 = " + std::to_string(seq_lens.size() + 1));
  }
  if (query_start_loc.front() != 0) {
    throw Error(
        ErrorCode::kInvalidArgument,
        "query_start_loc[0] is " + std::to_string(query_start_loc.front()) + ", expected 0");
  }
  for (size_t i = 0; i < seq_lens.size(); ++i) {
    const int q_len = query_start_loc[i + 1] - query_start_loc[i];
    if (q_len < 0 || seq_lens[i] < 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  "request " + std::to_string(i) + " has q_len " + std::to_string(q_len) +
                      " and seq_len " + std::to_string(seq_lens[i]) + " (both must be >= 0)");
    }
    if (shape.causal && q_len > seq_lens[i]) {
      throw Error(ErrorCode::kInvalidArgument,
                  "request " + std::to_string(i) + " has q_len " + std::to_string(q_len) +
                      " > seq_len " + std::to_string(seq_lens[i]) +
                      " (causal queries are the last q_len of seq_len positions)");
    }
  }
}

}  // namespace

KeySpan visible_key_range(const PlanShape& shape, int q_len, int kv_len, int row_begin,
                          int row_end) {
  const int group = shape.num_heads / shape.num_kv_heads;
  const MaskRule mask{shape.causal, shape.sliding_window, shape.chunk_size};
  return visible_keys_of_rows(mask, query_position(q_len, kv_len, row_begin / group),
                              query_position(q_len, kv_len, (row_end - 1) / group), kv_len);
}

CudaPlan plan_work(const PlanShape& shape, const std::vector<int32_t>& query_start_loc,
                   const std::vector<int32_t>& seq_lens) {
  check_metadata(shape, query_start_loc, seq_lens);
  const int group = shape.num_heads / shape.num_kv_heads;
  const int num_reqs = static_cast<int>(seq_lens.size());

  // 1. Unsplit items: one per row tile.
  struct Base {
    CudaWorkItem item;
    bool small;
  };
  std::vector<Base> base;
  std::vector<int> longest(static_cast<size_t>(num_reqs), 0);
  int64_t total_keys = 0;
  for (int i = 0; i < num_reqs; ++i) {
    const int q_start = query_start_loc[static_cast<size_t>(i)];
    const int q_len = query_start_loc[static_cast<size_t>(i) + 1] - q_start;
    const int kv_len = seq_lens[static_cast<size_t>(i)];
    const int rows = q_len * group;
    if (rows == 0) continue;
    const bool small = rows <= shape.small_rows;
    const int tile = small ? shape.small_rows : shape.large_rows;
    for (int r = 0; r < rows; r += tile) {
      CudaWorkItem it;
      it.seq = i;
      it.q_start = q_start;
      it.q_len = q_len;
      it.kv_len = kv_len;
      it.row_begin = r;
      it.row_end = std::min(rows, r + tile);
      const KeySpan range = visible_key_range(shape, q_len, kv_len, it.row_begin, it.row_end);
      it.kv_begin = range.begin;
      it.kv_end = range.end;
      base.push_back({it, small});
      longest[static_cast<size_t>(i)] =
          std::max(longest[static_cast<size_t>(i)], it.kv_end - it.kv_begin);
      total_keys += it.kv_end - it.kv_begin;
    }
  }

  // 2. Split-KV: when the unsplit grid would leave the GPU idle, cut every request's key
  // range into pieces of about split_len keys (a multiple of the kernel's tile) so that
  // the grid reaches about target_ctas CTAs. One split count per request keeps the partial
  // slots of a token consecutive.
  const int target = shape.target_ctas > 0 ? shape.target_ctas : 4 * shape.num_sms;
  const int64_t base_ctas = static_cast<int64_t>(base.size()) * shape.num_kv_heads;
  std::vector<int> splits(static_cast<size_t>(num_reqs), 1);
  if (shape.fixed_splits > 0) {
    splits.assign(static_cast<size_t>(num_reqs), std::min(shape.fixed_splits, shape.max_splits));
  } else if (base_ctas > 0 && base_ctas < target) {
    const int64_t work = total_keys * shape.num_kv_heads;
    int split_len = std::max<int>(shape.min_split_len, ceil_div(work, target));
    split_len = ceil_div(split_len, shape.kv_tile) * shape.kv_tile;
    for (int i = 0; i < num_reqs; ++i) {
      const int len = longest[static_cast<size_t>(i)];
      const int count =
          shape.round_splits ? (len + split_len / 2) / split_len : ceil_div(len, split_len);
      splits[static_cast<size_t>(i)] = std::clamp(count, 1, shape.max_splits);
    }
  }

  // 2b. The reserved workspace bounds the partial results: halve every split count until
  // they fit (the same halving for every request, so a graph-shaped plan stays so).
  if (shape.max_partial_slots > 0) {
    const auto slots_needed = [&] {
      int64_t slots = 0;
      for (int i = 0; i < num_reqs; ++i) {
        const int s = splits[static_cast<size_t>(i)];
        const int q_len =
            query_start_loc[static_cast<size_t>(i) + 1] - query_start_loc[static_cast<size_t>(i)];
        if (s > 1) slots += static_cast<int64_t>(q_len) * s;
      }
      return slots;
    };
    while (slots_needed() > shape.max_partial_slots) {
      for (int& s : splits) s = s > 1 ? (s + 1) / 2 : 1;
      if (std::all_of(splits.begin(), splits.end(), [](int s) { return s <= 1; })) break;
    }
  }

  CudaPlan plan;
  std::vector<int> partial_base(static_cast<size_t>(num_reqs), -1);
  for (int i = 0; i < num_reqs; ++i) {
    const int s = splits[static_cast<size_t>(i)];
    if (s <= 1) continue;
    const int q_start = query_start_loc[static_cast<size_t>(i)];
    const int q_len = query_start_loc[static_cast<size_t>(i) + 1] - q_start;
    if (q_len == 0) continue;
    partial_base[static_cast<size_t>(i)] = plan.num_partial_slots;
    for (int j = 0; j < q_len; ++j) {
      plan.combine_items.push_back({q_start + j, plan.num_partial_slots + j * s, s});
    }
    plan.num_partial_slots += q_len * s;
  }

  for (const Base& b : base) {
    const int s = splits[static_cast<size_t>(b.item.seq)];
    auto& out = b.small ? plan.small_items : plan.large_items;
    if (s <= 1) {
      out.push_back(b.item);
      continue;
    }
    const int len = b.item.kv_end - b.item.kv_begin;
    const int piece = ceil_div(ceil_div(len, s), shape.kv_tile) * shape.kv_tile;
    const int split_group = plan.num_split_groups++;
    for (int k = 0; k < s; ++k) {
      CudaWorkItem it = b.item;
      it.split = k;
      it.num_splits = s;
      it.split_group = split_group;
      it.partial_base = partial_base[static_cast<size_t>(b.item.seq)];
      it.kv_begin = std::min(b.item.kv_end, b.item.kv_begin + k * piece);
      it.kv_end = std::min(b.item.kv_end, it.kv_begin + piece);
      out.push_back(it);
    }
  }

  // 3. Longest key ranges first: causal prefill tiles differ in work by up to the whole
  // sequence, and the tail of the grid should hold the short ones.
  auto longer = [](const CudaWorkItem& a, const CudaWorkItem& b) {
    return (a.kv_end - a.kv_begin) > (b.kv_end - b.kv_begin);
  };
  std::stable_sort(plan.large_items.begin(), plan.large_items.end(), longer);
  std::stable_sort(plan.small_items.begin(), plan.small_items.end(), longer);
  return plan;
}

int max_split_count(const CudaPlan& plan) {
  int count = 1;
  for (const auto* items : {&plan.small_items, &plan.large_items}) {
    for (const CudaWorkItem& it : *items) count = std::max(count, it.num_splits);
  }
  return count;
}

std::vector<int32_t> uniform_seq_lens(const std::vector<int32_t>& query_start_loc, int seq_len) {
  return std::vector<int32_t>(query_start_loc.empty() ? 0 : query_start_loc.size() - 1, seq_len);
}

int reserved_partial_slots(const PlanShape& shape, const StepLimits& limits) {
  const int target = shape.target_ctas > 0 ? shape.target_ctas : 4 * shape.num_sms;
  return 2 * std::max(limits.max_num_tokens, 1) + target;
}

PlanBounds plan_bounds(const PlanShape& shape, const StepLimits& limits) {
  const int group = shape.num_heads / std::max(shape.num_kv_heads, 1);
  const size_t reqs = static_cast<size_t>(std::max(limits.max_num_reqs, 0));
  const size_t tokens = static_cast<size_t>(std::max(limits.max_num_tokens, 0));
  const size_t tile =
      static_cast<size_t>(std::max(std::min(shape.small_rows, shape.large_rows), 1));
  // Unsplit items: one per row tile, at most one partial tile per request.
  const size_t base = reqs + (tokens * static_cast<size_t>(group) + tile - 1) / tile;
  const size_t slots =
      static_cast<size_t>(shape.max_partial_slots > 0 ? shape.max_partial_slots
                                                      : reserved_partial_slots(shape, limits));
  PlanBounds bounds;
  // A split request of q_len tokens has at most q_len * group unsplit items, each cut into
  // its s pieces, and takes q_len * s partial slots: split items <= group * slots.
  bounds.items = base + static_cast<size_t>(group) * slots;
  bounds.combine_items = tokens;
  bounds.partial_slots = slots;
  bounds.split_groups = base;
  return bounds;
}

}  // namespace attnkit::cuda
