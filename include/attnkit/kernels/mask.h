#pragma once
// The visible-keys rule: which key positions a query sees. The one definition every
// kernel (CPU and CUDA), planner, REFERENCE and the runtime's dense verifier use; host and
// device code share it.
//
// Positions are absolute within a request: keys 0 .. kv_len-1. For causal attention the
// q_len queries of a step are the LAST q_len positions of the sequence, so query j sits at
// position query_position(q_len, kv_len, j) = kv_len - q_len + j and sees key k when
//   k <= pos                                   (causal)
//   k >  pos - sliding_window                  (sliding_window > 0; vLLM's left window)
//   k / chunk_size == pos / chunk_size         (chunk_size > 0; chunked local attention)
// Non-causal attention (encoder, encoder-only, encoder/cross) sees all kv_len keys.
//
// Every cut removes keys from one side only, so the visible keys of one query are always
// ONE interval. Intervals here are half-open, [begin, end), and never inverted: an empty
// interval has begin == end.

#include "attnkit/export.h"

#if defined(__CUDACC__)
#define ATTNKIT_MASK_FN __host__ __device__ __forceinline__
#else
#define ATTNKIT_MASK_FN inline
#endif

namespace attnkit {

// The mask of one layer: the part of a layer's attention that decides visibility.
struct ATTNKIT_API MaskRule {
  bool causal = true;
  int sliding_window = 0;  // 0 = none; else the query sees its last sliding_window keys
  int chunk_size = 0;      // 0 = none; else keys of its own chunk only
};

// A half-open interval [begin, end) of key positions; empty when begin == end.
struct ATTNKIT_API KeySpan {
  int begin = 0;
  int end = 0;
  ATTNKIT_MASK_FN bool empty() const { return begin >= end; }
  ATTNKIT_MASK_FN int size() const { return end > begin ? end - begin : 0; }
  ATTNKIT_MASK_FN bool contains(int key) const { return key >= begin && key < end; }
};

// Absolute position of query `token` (0-based within the step) of a request with q_len
// queries this step and kv_len keys in all (this step's included).
ATTNKIT_MASK_FN int query_position(int q_len, int kv_len, int token) {
  return kv_len - q_len + token;
}

// The keys a query at position `pos` sees, among kv_len keys.
ATTNKIT_MASK_FN KeySpan visible_keys(const MaskRule& mask, int pos, int kv_len) {
  if (!mask.causal) return {0, kv_len};
  int end = pos + 1 < kv_len ? pos + 1 : kv_len;
  if (end < 0) end = 0;
  int begin = 0;
  if (mask.sliding_window > 0) {
    const int lo = pos - mask.sliding_window + 1;
    if (lo > begin) begin = lo;
  }
  if (mask.chunk_size > 0 && pos >= 0) {
    const int lo = pos / mask.chunk_size * mask.chunk_size;
    if (lo > begin) begin = lo;
  }
  if (begin > end) begin = end;
  return {begin, end};
}

// Whether a query at `pos` sees key `key` (0 <= key < kv_len is the caller's bound).
ATTNKIT_MASK_FN bool key_visible(const MaskRule& mask, int pos, int key) {
  if (!mask.causal) return true;
  if (key > pos) return false;
  if (mask.sliding_window > 0 && key <= pos - mask.sliding_window) return false;
  if (mask.chunk_size > 0 && key / mask.chunk_size != pos / mask.chunk_size) return false;
  return true;
}

// The union of what the queries at positions first_pos .. last_pos (first_pos <= last_pos)
// see: the interval from the first query's begin to the last query's end. Both ends of
// visible_keys only grow with the position, so a tile of consecutive queries reads keys in
// this one interval (it over-covers only across a chunk boundary, where the per-key rule
// still masks).
ATTNKIT_MASK_FN KeySpan visible_keys_of_rows(const MaskRule& mask, int first_pos, int last_pos,
                                             int kv_len) {
  const KeySpan first = visible_keys(mask, first_pos, kv_len);
  const KeySpan last = visible_keys(mask, last_pos, kv_len);
  KeySpan span{first.begin, last.end};
  if (span.begin > span.end) span.begin = span.end;
  return span;
}

}  // namespace attnkit

#undef ATTNKIT_MASK_FN
