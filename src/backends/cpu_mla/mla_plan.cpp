#include "backends/cpu_mla/mla_plan.h"

#include <omp.h>

#include <algorithm>

namespace attnkit::cpu_mla {

MlaPlan make_mla_plan(std::span<const int32_t> query_start_loc, std::span<const int32_t> seq_lens,
                      int num_heads, const MaskRule& mask, const MlaPlanOptions& options) {
  MlaPlan plan;
  plan.num_heads = num_heads;
  plan.mask = mask;
  const int tile_tokens =
      std::clamp(options.target_rows / std::max(1, num_heads), 1, kMaxTileTokens);
  const int threads = options.threads > 0 ? options.threads : omp_get_max_threads();

  // Tiles first (one item each), then split the long ones if there are too few.
  std::vector<MlaWorkItem> tiles;
  for (size_t i = 0; i < seq_lens.size(); ++i) {
    const int q0 = query_start_loc[i], q1 = query_start_loc[i + 1];
    const int kv_len = seq_lens[i];
    for (int t = q0; t < q1; t += tile_tokens) {
      MlaWorkItem item;
      item.seq = static_cast<int>(i);
      item.token_begin = t;
      item.token_end = std::min(q1, t + tile_tokens);
      // Union of the rows' visible ranges; queries are the last q_len positions.
      const int first_pos = query_position(q1 - q0, kv_len, t - q0);
      const int last_pos = first_pos + (item.token_end - item.token_begin) - 1;
      const KeySpan keys = visible_keys_of_rows(mask, first_pos, last_pos, kv_len);
      item.key_begin = keys.begin;
      item.key_end = keys.end;
      tiles.push_back(item);
    }
  }
  const int tile_count = static_cast<int>(tiles.size());
  for (const MlaWorkItem& tile : tiles) {
    const int rows = (tile.token_end - tile.token_begin) * num_heads;
    plan.max_rows = std::max(plan.max_rows, rows);
    const int len = tile.key_end - tile.key_begin;
    int splits = 1;
    if (options.force_splits > 0) {
      splits = std::max(1, std::min(options.force_splits, len));
    } else if (tile_count < 2 * threads) {
      const int by_threads = (2 * threads + tile_count - 1) / tile_count;
      const int by_length = std::max(1, len / std::max(1, options.min_split_keys));
      splits = std::min(by_threads, by_length);
    }
    if (splits == 1) {
      plan.items.push_back(tile);
      continue;
    }
    const int chunk = (len + splits - 1) / splits;
    const int used = (len + chunk - 1) / chunk;  // every chunk non-empty
    for (int s = 0; s < used; ++s) {
      MlaWorkItem item = tile;
      item.key_begin = tile.key_begin + s * chunk;
      item.key_end = std::min(tile.key_end, item.key_begin + chunk);
      item.split = s;
      item.num_splits = used;
      item.partial_row = plan.partial_rows + static_cast<int64_t>(s) * rows;
      plan.items.push_back(item);
    }
    plan.partial_rows += static_cast<int64_t>(used) * rows;
  }
  return plan;
}

}  // namespace attnkit::cpu_mla
