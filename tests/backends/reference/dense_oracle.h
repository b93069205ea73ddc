#pragma once
// An independent dense attention for checking the paged REFERENCE kernels: every request's
// queries, keys and values are plain row-major double arrays; the score matrix, the mask
// and the softmax are materialised in full. It shares no code with the kernels.

#include <vector>

namespace attnkit::testing {

struct DenseRequest {
  int q_len = 0;
  int kv_len = 0;
  std::vector<double> q;  // [q_len, num_heads, head_size]
  std::vector<double> k;  // [kv_len, num_kv_heads, head_size]
  std::vector<double> v;  // [kv_len, num_kv_heads, head_size_v]
};

struct DenseShape {
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_size = 0;
  int head_size_v = 0;
  double scale = 1.0;
  bool causal = true;
  int sliding_window = 0;
  int chunk_size = 0;
  double soft_cap = 0.0;
  std::vector<double> sinks;  // [num_heads] or empty
};

// Whether the query at position `pos` sees key `k` (the contract, spelled predicate by
// predicate).
bool dense_visible(const DenseShape& s, int pos, int k);

// [q_len, num_heads, head_size_v] for one request.
std::vector<double> dense_attention(const DenseShape& shape, const DenseRequest& request);

}  // namespace attnkit::testing
