// The example plugin's kernels: a straightforward CPU paged attention (one query token and
// head at a time, scores in fp32) and the cache update. Pure functions over raw pointers
// and the small structs below; no attnkit header besides the plugin ABI's constants.
#pragma once

#include <stdint.h>

namespace example {

// Element types are plugin_abi.h's ATTNKIT_SCALAR_FLOAT32 / _FLOAT16 / _BFLOAT16.

// A strided 3-D view [rows, heads, dims] (q, fresh k/v, output), strides in elements.
struct Rows {
  void* data;
  int32_t scalar_type;
  int64_t row_stride, head_stride, dim_stride;
};

// A paged NHD cache [num_blocks, block_size, heads, dims], strides in elements.
struct PagedCache {
  void* data;
  int32_t scalar_type;
  int64_t num_blocks;
  int64_t block_stride, slot_stride, head_stride, dim_stride;
};

// The batch, from the step's plan: per-token request and absolute position.
struct Batch {
  int32_t num_tokens;
  const int32_t* token_request;   // [num_tokens] request each query token belongs to
  const int32_t* token_position;  // [num_tokens] absolute position of each query token
  const int32_t* seq_lens;        // [num_requests] keys each request attends over
  const int32_t* block_table;     // [num_requests, block_table_stride]
  int32_t block_table_stride;
  int32_t block_size;
  const int64_t* slot_mapping;  // [num_tokens]; -1 = do not write
};

struct Shape {
  int32_t num_heads, num_kv_heads, head_size, head_size_v;
  float scale;
  int32_t sliding_window;  // 0 = none
};

// Copies each token's fresh key/value into the cache at its slot. Returns the first token
// whose slot lies outside the cache, or -1 when every slot was valid (nothing is written
// for an invalid token or after it).
int32_t write_cache(const Batch& batch, const Shape& shape, const Rows& key, const Rows& value,
                    const PagedCache& k_cache, const PagedCache& v_cache);

// Floats of scratch attend() needs: one score per visible key, plus the query row and the
// output accumulator of one head.
int64_t attend_scratch_floats(int32_t max_seq_len, const Shape& shape);

// Causal attention (with an optional left sliding window) of every query token over its
// request's cached keys; query, caches and output share one element type. `scratch` holds
// attend_scratch_floats() floats. Returns the first token whose block table points outside
// the cache, or -1.
int32_t attend(const Batch& batch, const Shape& shape, const Rows& query, const PagedCache& k_cache,
               const PagedCache& v_cache, const Rows& output, float* scratch);

}  // namespace example
