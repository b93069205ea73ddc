#include "backends/cpu_flash/flash_plan.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "attnkit/core/error.h"
#include "backends/cpu_flash/flash_amx_layout.h"

namespace attnkit::cpu {
namespace {

int64_t round_up(int64_t v, int64_t m) { return (v + m - 1) / m * m; }

// Keys of a split are a multiple of this (a whole number of 16-key tiles).
constexpr int kSplitAlign = 16;

}  // namespace

ScratchLayout scratch_layout(int max_rows, int head_size, int head_size_v, int tile_keys) {
  ScratchLayout s;
  int64_t at = 0;
  auto take = [&at](int64_t floats) {
    const int64_t start = at;
    at += round_up(std::max<int64_t>(floats, 1), 16);  // 16 floats = 64 bytes
    return start;
  };
  s.q = take(int64_t{max_rows} * head_size);
  s.o = take(int64_t{max_rows} * head_size_v);
  s.p = take(int64_t{max_rows} * tile_keys);
  s.m = take(max_rows);
  s.l = take(max_rows);
  s.alpha = take(max_rows);
  s.kf = take(int64_t{tile_keys} * head_size);
  s.vf = take(int64_t{tile_keys} * head_size_v);
  s.iv = take(int64_t{max_rows} * 2);
  s.total = at;
  return s;
}

FlashPlan make_flash_plan(std::span<const int32_t> query_start_loc,
                          std::span<const int32_t> seq_lens, int num_heads, int num_kv_heads,
                          int head_size, int head_size_v, const MaskRule& mask,
                          const FlashPlanOptions& options) {
  ATTNKIT_CHECK(num_kv_heads > 0 && num_heads % num_kv_heads == 0, "bad head counts");
  ATTNKIT_CHECK(query_start_loc.size() == seq_lens.size() + 1, "bad batch description");
  FlashPlan plan;
  plan.num_heads = num_heads;
  plan.num_kv_heads = num_kv_heads;
  plan.head_size = head_size;
  plan.head_size_v = head_size_v;
  plan.num_threads = options.num_threads > 0 ? options.num_threads : omp_get_max_threads();
  const int group = num_heads / num_kv_heads;
  const int num_seqs = static_cast<int>(seq_lens.size());
  const int tile_tokens = std::max(1, options.rows_per_tile / group);

  // Pass 1: one item per (request, KV head, query tile) over its whole visible key range.
  struct Tile {
    int seq, q_begin, q_end, k_begin, k_end;
  };
  std::vector<Tile> tiles;
  for (int s = 0; s < num_seqs; ++s) {
    const int q_len = query_start_loc[s + 1] - query_start_loc[s];
    const int kv_len = seq_lens[s];
    for (int q0 = 0; q0 < q_len; q0 += tile_tokens) {
      const int q1 = std::min(q_len, q0 + tile_tokens);
      const KeySpan keys = visible_keys_of_rows(mask, query_position(q_len, kv_len, q0),
                                                query_position(q_len, kv_len, q1 - 1), kv_len);
      tiles.push_back({s, q0, q1, keys.begin, keys.end});
    }
  }
  // KV heads per item of a tile (head packing for decode-sized tiles, see flash_plan.h).
  auto heads_per_item = [&](const Tile& t) {
    const int rows = (t.q_end - t.q_begin) * group;
    return rows <= options.max_packed_head_rows ? num_kv_heads : 1;
  };
  int64_t base_items = 0;
  for (const Tile& t : tiles) base_items += num_kv_heads / heads_per_item(t);
  const int64_t target_items = int64_t{plan.num_threads} * options.target_items_per_thread;

  // Pass 2: split the key range of single-tile requests when there are too few items to
  // keep every thread busy (flash-decoding). Each split covers >= min_split_keys keys.
  plan.splits.assign(static_cast<size_t>(num_seqs) * num_kv_heads, 1);
  int64_t partial_at = 0;
  std::vector<FlashWorkItem> items;
  int max_rows = 0;
  for (const Tile& t : tiles) {
    const int rows = (t.q_end - t.q_begin) * group;
    const int pack = heads_per_item(t);
    max_rows = std::max(max_rows, rows * pack);
    const int q_len = query_start_loc[t.seq + 1] - query_start_loc[t.seq];
    const bool single_tile = t.q_end - t.q_begin == q_len;
    const int keys = t.k_end - t.k_begin;
    int splits = 1;
    if (single_tile && base_items < target_items && options.min_split_keys > 0) {
      const int64_t wanted = (target_items + base_items - 1) / base_items;
      const int64_t by_keys = keys / std::max(options.min_split_keys, 1);
      splits = static_cast<int>(
          std::clamp<int64_t>(std::min(wanted, by_keys), 1, std::max(1, options.max_splits)));
    }
    const int chunk =
        splits > 1 ? static_cast<int>(round_up((keys + splits - 1) / splits, kSplitAlign)) : keys;
    if (splits > 1) splits = (keys + chunk - 1) / chunk;
    // Partial results of a head group: [head][split][stride] floats from `base`.
    const int64_t stride = round_up(int64_t{rows} * (head_size_v + 2), 16);
    for (int h0 = 0; h0 < num_kv_heads; h0 += pack) {
      const int64_t base = partial_at;
      for (int h = h0; h < h0 + pack; ++h) {
        plan.splits[static_cast<size_t>(t.seq) * num_kv_heads + h] = splits;
        if (splits > 1) {
          plan.merges.push_back({t.seq, h, t.q_begin, t.q_end, splits,
                                 base + int64_t{h - h0} * splits * stride, stride});
        }
      }
      for (int sp = 0; sp < splits; ++sp) {
        FlashWorkItem it;
        it.seq = t.seq;
        it.kv_head = h0;
        it.num_kv_heads = pack;
        it.q_begin = t.q_begin;
        it.q_end = t.q_end;
        it.k_begin = t.k_begin + sp * chunk;
        it.k_end = splits > 1 ? std::min(t.k_end, it.k_begin + chunk) : t.k_end;
        it.cost = int64_t{rows} * pack * (std::max(it.k_end - it.k_begin, 1) + 64);
        if (splits > 1) {
          it.partial_offset = base + sp * stride;
          it.partial_head_stride = splits * stride;
        }
        items.push_back(it);
      }
      if (splits > 1) partial_at += int64_t{pack} * splits * stride;
    }
  }
  // Longest first: with dynamic scheduling this bounds the tail by the shortest items.
  // Merges find split results by partial offset, so the order is free.
  std::stable_sort(items.begin(), items.end(),
                   [](const FlashWorkItem& a, const FlashWorkItem& b) { return a.cost > b.cost; });
  plan.items = std::move(items);
  plan.max_rows = max_rows;
  plan.partial_floats = partial_at;
  // Either flash_kernel_impl.h's kernels or the 8-lane prefill kernel's, whichever needs more.
  plan.scratch_floats_per_thread =
      std::max(scratch_layout(max_rows, head_size, head_size_v).total,
               scratch_layout(max_rows, head_size, head_size_v, kOuterTileKeys).total);
  // The AMX kernel's layout (flash_amx_layout.h): each KV head's rows rounded up to 16.
  for (const FlashWorkItem& it : plan.items) {
    const int64_t head_rows = round_up(int64_t{it.q_end - it.q_begin} * group, 16);
    plan.scratch_floats_per_thread = std::max(
        plan.scratch_floats_per_thread,
        flash_amx_layout(head_rows * it.num_kv_heads, head_rows, head_size, head_size_v).total);
  }
  return plan;
}

float* FlashWorkspace::aligned(std::vector<float>& v) {
  const auto address = reinterpret_cast<uintptr_t>(v.data());
  const uintptr_t pad = (64 - address % 64) % 64;
  return v.data() + pad / sizeof(float);
}

void FlashWorkspace::ensure(const FlashPlan& plan) {
  const auto partial = static_cast<size_t>(plan.partial_floats + 16);
  if (partials_.size() < partial) partials_.resize(partial);
}

float* FlashWorkspace::partials() { return aligned(partials_); }

}  // namespace attnkit::cpu
