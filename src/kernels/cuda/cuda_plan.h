#pragma once
// Work partitioning for the CUDA kernels, planned on the host once per step (the "plan"
// half of plan/run). Pure C++: unit-tested without a GPU.
//
// Rows. A request's query tokens and the query heads that share one KV head are packed
// into "rows": row r of request i (for one KV head) is token r / G, query head
// kv_head * G + r % G, where G = num_heads / num_kv_heads. Packing the G heads of a GQA
// group into the tensor-core M dimension means a decode step reads each K/V byte once.
//
// Work items. One CTA (times num_kv_heads, grid.y) runs one CudaWorkItem: rows
// [row_begin, row_end) of request `seq` over key positions [kv_begin, kv_end). A request
// whose rows are split over the KV range (split-KV, for long decodes) gets num_splits > 1:
// split k of token j writes a partial result to slot partial_base + j * num_splits + k,
// and a combine pass (one CudaCombineItem per token) merges the partials.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "attnkit/core/execution.h"
#include "attnkit/kernels/mask.h"

namespace attnkit::cuda {

// Plain ints so the array can be copied to the device as is. Layout shared with kernels.
struct CudaWorkItem {
  int32_t seq = 0;
  int32_t q_start = 0;  // first token row of the request in q/out
  int32_t q_len = 0;
  int32_t kv_len = 0;
  int32_t row_begin = 0;  // packed rows (see above), end exclusive
  int32_t row_end = 0;
  int32_t kv_begin = 0;  // key positions this item reads, end exclusive
  int32_t kv_end = 0;
  int32_t split = 0;
  int32_t num_splits = 1;
  int32_t partial_base = 0;  // slot of (token 0, split 0) when num_splits > 1
  // When num_splits > 1: which group of splits (same seq and rows, one per unsplit item)
  // this is; kernels that merge in place count finished splits per (group, kv head).
  int32_t split_group = -1;
};

struct CudaCombineItem {
  int32_t token = 0;       // row of q/out
  int32_t slot_begin = 0;  // its num_splits partial slots are consecutive
  int32_t num_splits = 0;
};

// What the planner needs to know about the kernels and the device.
struct PlanShape {
  int num_heads = 0;
  int num_kv_heads = 0;
  bool causal = true;
  int sliding_window = 0;
  int chunk_size = 0;
  int num_sms = 132;  // multiprocessors of the device
  // Requests with q_len * G <= small_rows go to the "small" kernel whose CTA holds
  // small_rows rows; the others are cut into tiles of large_rows rows.
  int small_rows = 16;
  int large_rows = 64;
  int kv_tile = 64;         // keys per tile of the kernel (split lengths are multiples)
  int target_ctas = 0;      // split-KV until about this many CTAs (0: 4 * num_sms)
  int min_split_len = 256;  // never split below this many keys per split
  int max_splits = 64;
  // Split count per request: longest / split_len rounded to the nearest integer instead
  // of up, so that a grid a few CTAs short of the target stays unsplit (one wave) rather
  // than doubling into two waves of half-length splits plus their merge.
  bool round_splits = false;
  // > 0: every request with rows is split into exactly this many pieces (some may be
  // empty), whatever its length: a graph-shaped plan (ExecutionContext::graph_shape),
  // whose item counts depend only on the batch's shape.
  int fixed_splits = 0;
  // > 0: the reserved workspace holds this many partial slots; split counts are halved
  // until the step's partial results fit.
  int max_partial_slots = 0;
};

struct CudaPlan {
  std::vector<CudaWorkItem> small_items;  // run by the small-row (decode) kernel
  std::vector<CudaWorkItem> large_items;  // run by the large-row (prefill) kernel
  std::vector<CudaCombineItem> combine_items;
  int num_partial_slots = 0;  // partial results: [slots, num_heads, head_size_v] fp32
  int num_split_groups = 0;   // distinct split_group values (0 .. num_split_groups - 1)
};

// The keys rows [row_begin, row_end) of a request see together (mask.h's rule over the
// rows' positions); empty when no row sees a key.
KeySpan visible_key_range(const PlanShape& shape, int q_len, int kv_len, int row_begin,
                          int row_end);

// Plans one step. query_start_loc has num_reqs + 1 entries, seq_lens num_reqs.
// Throws Error(kInvalidArgument) on inconsistent metadata (naming the request).
CudaPlan plan_work(const PlanShape& shape, const std::vector<int32_t>& query_start_loc,
                   const std::vector<int32_t>& seq_lens);

// The largest split count of a plan: 1 when nothing is split.
int max_split_count(const CudaPlan& plan);

// seq_lens of a batch of query_start_loc's shape whose every request attends over
// seq_len keys (what a graph-shaped plan is sized for).
std::vector<int32_t> uniform_seq_lens(const std::vector<int32_t>& query_start_loc, int seq_len);

// Upper bounds of a step's plan within `limits` (the reserved sizes of the upload).
struct PlanBounds {
  size_t items = 0;  // small + large work items
  size_t combine_items = 0;
  size_t partial_slots = 0;
  size_t split_groups = 0;
};
// Bounds for plans of `shape` whose max_partial_slots is set (see reserved_partial_slots).
PlanBounds plan_bounds(const PlanShape& shape, const StepLimits& limits);
// The partial slots reserved for steps within `limits`: two per query token, plus one
// full grid of splits (decodes of few requests split into up to target_ctas pieces).
int reserved_partial_slots(const PlanShape& shape, const StepLimits& limits);

}  // namespace attnkit::cuda
