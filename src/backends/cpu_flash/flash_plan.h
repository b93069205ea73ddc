#pragma once
// The plan of one CPU flash-attention step (the "plan" half of plan/run): how the batch is
// cut into work items, which requests use split-KV (flash-decoding) and how many chunks,
// and how much scratch the run needs. Built once per step from the batch description;
// flash_attention() only runs it.
//
// A work item is (request, KV heads, query tile, key range). Its rows are, per KV head, the
// query heads of that KV head times the tokens of the query tile, packed as row = token *
// group + g with group = num_heads / num_kv_heads (GQA packing: every K/V byte an item
// reads serves all its rows). Decode-sized tiles (few rows per KV head) take every KV head
// of the request in one item (head packing): with the NHD cache layout one head's rows are
// strided (num_kv_heads * head_size apart), so an item per head would read scattered
// fragments of each block, while all heads together read each block whole. A request whose rows fit
// one tile and whose visible keys are many may be cut into several key ranges (splits); their
// partial results (unnormalised output, running max and sum) go to a partial buffer and a merge
// pass combines them with the log-sum-exp rule.

#include <cstdint>
#include <span>
#include <vector>

#include "attnkit/kernels/mask.h"

namespace attnkit::cpu {

struct FlashPlanOptions {
  int num_threads = 0;              // 0 = omp_get_max_threads()
  int rows_per_tile = 32;           // target rows (tokens x group) of a prefill query tile
  int min_split_keys = 512;         // a split covers at least this many keys
  int max_splits = 64;              // per request and KV head
  int target_items_per_thread = 4;  // split-KV kicks in below this many items per thread
  int max_packed_head_rows = 16;    // pack KV heads when a tile has <= this many rows per head
};

struct FlashWorkItem {
  int32_t seq = 0;
  int32_t kv_head = 0;              // first KV head
  int32_t num_kv_heads = 1;         // KV heads kv_head .. kv_head + num_kv_heads - 1
  int32_t q_begin = 0, q_end = 0;   // query tokens [q_begin, q_end) of the request
  int32_t k_begin = 0, k_end = 0;   // key positions [k_begin, k_end) this item visits
  int64_t partial_offset = -1;      // floats into the partial buffer; -1 = writes output
  int64_t partial_head_stride = 0;  // floats between consecutive heads' partial results
  int64_t cost = 0;                 // rows x keys, for scheduling
};

// The splits of one (request, KV head, query tile) to merge after the items ran.
struct FlashMergeGroup {
  int32_t seq = 0;
  int32_t kv_head = 0;
  int32_t q_begin = 0, q_end = 0;
  int32_t num_splits = 0;
  // Split k's partial result starts at partial_offset + k * partial_stride floats:
  //   o [rows, head_size_v] (unnormalised), then m [rows] (running max), l [rows] (sum).
  int64_t partial_offset = 0;
  int64_t partial_stride = 0;
};

struct FlashPlan {
  int num_heads = 0, num_kv_heads = 0, head_size = 0, head_size_v = 0;
  int num_threads = 1;
  int max_rows = 0;                     // largest rows of any item (all its KV heads)
  std::vector<FlashWorkItem> items;     // sorted by decreasing cost (longest first)
  std::vector<FlashMergeGroup> merges;  // empty when no request is split
  // Per request and KV head: number of key splits (1 = none), [num_seqs * num_kv_heads].
  std::vector<int32_t> splits;
  int64_t partial_floats = 0;             // size of the partial buffer
  int64_t scratch_floats_per_thread = 0;  // size of each thread's scratch
};

// Plans a step. query_start_loc [num_seqs + 1] and seq_lens [num_seqs] as in
// PagedAttentionParams; requires num_heads % num_kv_heads == 0 and positive head sizes.
FlashPlan make_flash_plan(std::span<const int32_t> query_start_loc,
                          std::span<const int32_t> seq_lens, int num_heads, int num_kv_heads,
                          int head_size, int head_size_v, const MaskRule& mask,
                          const FlashPlanOptions& options = {});

// The partial results a plan's split-KV items write for their merges: 64-byte aligned,
// reused across steps; ensure() only grows. Each thread's scratch
// (plan.scratch_floats_per_thread floats) is its own buffer, kept across calls
// (kernels/cpu/thread_scratch.h), so a step's new metadata allocates none of it.
class FlashWorkspace {
 public:
  void ensure(const FlashPlan& plan);
  float* partials();

 private:
  static float* aligned(std::vector<float>& v);
  std::vector<float> partials_;
};

// Keys per tile of flash_kernel_impl.h's kernels (the widest SIMD target's fp32 lanes).
inline constexpr int kMaxTileKeys = 16;
// Keys per step of the 8-lane prefill kernel (flash_outer_product_impl.h): four vectors of 8
// lanes, so its softmax bookkeeping and the rescale of its output rows come once per 32 keys.
inline constexpr int kOuterTileKeys = 32;

// Where each region of a thread's scratch starts (in floats; each 64-byte aligned), for a
// kernel whose key tiles hold tile_keys keys:
//   q     [max_rows, head_size]   query rows (fp32, or raw bf16 for the bf16-dot path)
//   o     [max_rows, head_size_v] unnormalised output accumulator
//   p     [max_rows, tile_keys]   softmax numerators of the current key tile
//   m, l, alpha [max_rows]        running max, running sum, rescale factor of the tile
//   kf    [tile_keys, head_size]  current key tile converted to fp32 (the outer-product
//                                 kernel: transposed, [head_size][tile_keys])
//   vf    [tile_keys, head_size_v] current value tile converted to fp32
//   iv    [max_rows] KeySpan      visible keys of each query token (2 int32 each)
// A head-packed item keeps its heads' rows one after another in q, o, p, m, l and alpha.
struct ScratchLayout {
  int64_t q = 0, o = 0, p = 0, m = 0, l = 0, alpha = 0, kf = 0, vf = 0, iv = 0, total = 0;
};
ScratchLayout scratch_layout(int max_rows, int head_size, int head_size_v,
                             int tile_keys = kMaxTileKeys);

}  // namespace attnkit::cpu
