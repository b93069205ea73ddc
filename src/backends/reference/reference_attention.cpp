// The REFERENCE attention kernel: for each request, the visible keys and values are first
// dequantised into double-precision scratch ([num_kv_heads, kv_len, head_size] for K and
// [num_kv_heads, kv_len, head_size_v] for V), then every (query token, head) row computes
// its scores, softmax and weighted sum of values in double and rounds once on output.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "attnkit/core/error.h"
#include "attnkit/core/numeric.h"
#include "attnkit/kernels/mask.h"
#include "backends/reference/reference_kernels.h"

namespace attnkit {
namespace {

// Element offset of key position `pos` of request `seq` (KV head 0, d = 0), in paged or
// contiguous mode.
int64_t kv_row_offset(const PagedAttentionParams& p, int seq, int pos, int64_t block_stride,
                      int64_t token_stride) {
  if (p.block_table != nullptr) {
    const int64_t entry = static_cast<int64_t>(seq) * p.block_table_stride + pos / p.block_size;
    const int64_t block = p.block_table[entry];
    return block * block_stride + static_cast<int64_t>(pos % p.block_size) * token_stride;
  }
  return (static_cast<int64_t>(p.kv_start_loc[seq]) + pos) * token_stride;
}

// Dequantises one request's K (or V) into [num_kv_heads, kv_len, dim] doubles.
void gather_kv(const PagedAttentionParams& p, int seq, int kv_len, const void* cache, int dim,
               float scale, int64_t block_stride, int64_t token_stride, int64_t head_stride,
               std::vector<double>& out) {
  out.assign(static_cast<size_t>(p.num_kv_heads) * kv_len * dim, 0.0);
  for (int pos = 0; pos < kv_len; ++pos) {
    const int64_t row = kv_row_offset(p, seq, pos, block_stride, token_stride);
    for (int kvh = 0; kvh < p.num_kv_heads; ++kvh) {
      const int64_t base = row + kvh * head_stride;
      double* dst = out.data() + (static_cast<size_t>(kvh) * kv_len + pos) * dim;
      for (int d = 0; d < dim; ++d) {
        dst[d] = static_cast<double>(load_as_float(cache, p.kv_dtype, base + d)) * scale;
      }
    }
  }
}

// One output row: softmax(scores) over the visible keys `range` plus the sink, times V.
void attend_row(const PagedAttentionParams& p, int token, int head, int kv_len, KeySpan range,
                const std::vector<double>& keys, const std::vector<double>& values,
                std::vector<double>& scores, std::vector<double>& acc) {
  const int group = p.num_heads / p.num_kv_heads;
  const int kvh = head / group;
  const int64_t q_base = token * p.q_token_stride + head * p.q_head_stride;
  std::vector<double> q(static_cast<size_t>(p.head_size));
  for (int d = 0; d < p.head_size; ++d) q[d] = load_as_float(p.q, p.q_dtype, q_base + d);

  const bool has_sink = p.sinks != nullptr;
  double max_score =
      has_sink ? static_cast<double>(p.sinks[head]) : -std::numeric_limits<double>::infinity();
  const int n = range.size();
  scores.assign(static_cast<size_t>(n), 0.0);
  for (int i = 0; i < n; ++i) {
    const double* k = keys.data() + (static_cast<size_t>(kvh) * kv_len + range.begin + i) *
                                        static_cast<size_t>(p.head_size);
    double dot = 0.0;
    for (int d = 0; d < p.head_size; ++d) dot += q[d] * k[d];
    double s = static_cast<double>(p.scale) * dot;
    if (p.soft_cap > 0.0f) s = p.soft_cap * std::tanh(s / p.soft_cap);
    scores[i] = s;
    max_score = std::max(max_score, s);
  }

  acc.assign(static_cast<size_t>(p.head_size_v), 0.0);
  double denom = has_sink ? std::exp(static_cast<double>(p.sinks[head]) - max_score) : 0.0;
  for (int i = 0; i < n; ++i) {
    const double w = std::exp(scores[i] - max_score);
    denom += w;
    const double* v = values.data() + (static_cast<size_t>(kvh) * kv_len + range.begin + i) *
                                          static_cast<size_t>(p.head_size_v);
    for (int d = 0; d < p.head_size_v; ++d) acc[d] += w * v[d];
  }
  // A row that sees no key (and has no sink) writes zeros; with only a sink, acc is zero.
  const double inv = denom > 0.0 ? 1.0 / denom : 0.0;
  const int64_t o_base = token * p.o_token_stride + head * p.o_head_stride;
  for (int d = 0; d < p.head_size_v; ++d) {
    store_from_float(p.out, p.q_dtype, o_base + d, static_cast<float>(acc[d] * inv));
  }
}

}  // namespace

void reference_paged_attention(const PagedAttentionParams& p) {
  ATTNKIT_CHECK(p.num_heads > 0 && p.num_kv_heads > 0 && p.num_heads % p.num_kv_heads == 0,
                "num_heads must be a positive multiple of num_kv_heads");
  ATTNKIT_CHECK(p.head_size > 0 && p.head_size_v > 0, "head sizes must be positive");
  ATTNKIT_CHECK(p.block_table != nullptr || p.kv_start_loc != nullptr,
                "need a block table (paged) or kv_start_loc (contiguous)");
  ATTNKIT_CHECK(p.block_table == nullptr || p.block_size > 0, "paged mode needs block_size");

  std::vector<double> keys, values;
  for (int seq = 0; seq < p.num_seqs; ++seq) {
    const int q_begin = p.query_start_loc[seq];
    const int q_len = p.query_start_loc[seq + 1] - q_begin;
    const int kv_len = p.seq_lens[seq];
    ATTNKIT_CHECK(q_len >= 0 && kv_len >= 0, "negative query or sequence length");
    ATTNKIT_CHECK(!p.causal || q_len <= kv_len, "causal request with more queries than keys");
    if (q_len == 0) continue;
    gather_kv(p, seq, kv_len, p.k_cache, p.head_size, p.k_scale, p.k_block_stride, p.k_token_stride,
              p.k_head_stride, keys);
    gather_kv(p, seq, kv_len, p.v_cache, p.head_size_v, p.v_scale, p.v_block_stride,
              p.v_token_stride, p.v_head_stride, values);

    const int rows = q_len * p.num_heads;
    // Threads only pay off for large requests; small ones run serially (a thread team's
    // start-up and barrier cost more than they save, more so on a busy machine).
    const double work = static_cast<double>(rows) * kv_len * (p.head_size + p.head_size_v);
#pragma omp parallel if (work > 3.2e7)
    {
      std::vector<double> scores, acc;
#pragma omp for schedule(dynamic, 4)
      for (int r = 0; r < rows; ++r) {
        const int j = r / p.num_heads;
        const int head = r % p.num_heads;
        const int pos = query_position(q_len, kv_len, j);
        attend_row(p, q_begin + j, head, kv_len, visible_keys(mask_rule(p), pos, kv_len), keys,
                   values, scores, acc);
      }
    }
  }
}

void reference_cache_update(const CacheUpdateParams& p) {
  ATTNKIT_CHECK(p.block_size > 0, "cache update needs block_size");
  const bool has_value = p.value != nullptr;
  for (int t = 0; t < p.num_tokens; ++t) {
    const int64_t slot = p.slot_mapping[t];
    if (slot < 0) continue;  // padding, or a cross-attention step whose cache is filled
    const int64_t block = slot / p.block_size;
    const int64_t offset = slot % p.block_size;
    for (int h = 0; h < p.num_kv_heads; ++h) {
      const int64_t k_src = t * p.key_token_stride + h * p.key_head_stride;
      const int64_t k_dst =
          block * p.k_block_stride + offset * p.k_token_stride + h * p.k_head_stride;
      for (int d = 0; d < p.head_size; ++d) {
        const float x = load_as_float(p.key, p.src_dtype, k_src + d);
        store_from_float(p.k_cache, p.kv_dtype, k_dst + d, x / p.k_scale);
      }
      if (!has_value) continue;
      const int64_t v_src = t * p.value_token_stride + h * p.value_head_stride;
      const int64_t v_dst =
          block * p.v_block_stride + offset * p.v_token_stride + h * p.v_head_stride;
      for (int d = 0; d < p.head_size_v; ++d) {
        const float x = load_as_float(p.value, p.src_dtype, v_src + d);
        store_from_float(p.v_cache, p.kv_dtype, v_dst + d, x / p.v_scale);
      }
    }
  }
}

}  // namespace attnkit
