#pragma once
// CPU_MLA's work partitioning. All query heads of a request share one latent K/V stream,
// so a work item is (request, a tile of its query tokens x ALL heads, a key range): the
// kernel reads each latent row of the range once and uses it for every row of the item.
//
// Split-KV: when a step has too few items to occupy the threads (decode with few
// requests), each item's key range is cut into `num_splits` chunks; the chunks write
// partial results (unnormalised output, running max m and sum l per row) into the
// workspace and merge_splits() combines them with the log-sum-exp rule.

#include <cstdint>
#include <span>
#include <vector>

#include "attnkit/kernels/mask.h"

namespace attnkit::cpu_mla {

struct MlaWorkItem {
  int seq = 0;
  int token_begin = 0, token_end = 0;  // absolute query rows (of q / out)
  int key_begin = 0, key_end = 0;      // key positions [begin, end) this item reads
  int split = 0, num_splits = 1;       // chunk index within its tile
  int64_t partial_row = 0;             // first partial row (split items only)
};

struct MlaPlan {
  int num_heads = 0;
  MaskRule mask;  // which keys each query sees (chunk_size 0: CPU_MLA has no chunking)
  std::vector<MlaWorkItem> items;
  int max_rows = 0;          // tokens x heads of the largest item
  int64_t partial_rows = 0;  // rows of partial results all split items write
};

// Query tokens of one item never exceed this (per-token mask bounds live on the stack).
inline constexpr int kMaxTileTokens = 64;

struct MlaPlanOptions {
  int threads = 0;           // 0 = omp_get_max_threads()
  int min_split_keys = 256;  // never split a key range into chunks shorter than this
  int target_rows = 64;      // tokens per item: max(1, target_rows / num_heads)
  int force_splits = 0;      // > 0: split every tile into this many chunks (tests)
};

MlaPlan make_mla_plan(std::span<const int32_t> query_start_loc, std::span<const int32_t> seq_lens,
                      int num_heads, const MaskRule& mask, const MlaPlanOptions& options = {});

}  // namespace attnkit::cpu_mla
