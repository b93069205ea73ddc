#pragma once
// Test support: one random attention problem over a paged (or contiguous) KV cache, the
// kernel-contract view of it, and an independent dense fp64 oracle (materialised scores,
// explicit mask, softmax with sinks) written straight from the contract's definitions.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "attnkit/core/enums.h"
#include "attnkit/core/numeric.h"
#include "attnkit/kernels/paged_attention_params.h"

namespace attnkit::testing {

struct CaseSpec {
  int num_heads = 8, num_kv_heads = 2, head_size = 64, head_size_v = 64;
  ScalarType q_dtype = ScalarType::kFloat32;
  ScalarType kv_dtype = ScalarType::kFloat32;
  int block_size = 16;
  bool hnd = false;         // HND cache layout (else NHD)
  bool contiguous = false;  // contiguous K/V rows (encoder-only), no block table
  int contiguous_gap = 3;   // unused rows between requests in contiguous mode
  bool mla = false;         // v_cache == k_cache, V = first head_size_v elements
  std::vector<int> q_lens{1};
  std::vector<int> kv_lens{16};
  bool causal = true;
  int sliding_window = 0, chunk_size = 0;
  float soft_cap = 0.0f;
  bool sinks = false;
  float k_scale = 1.0f, v_scale = 1.0f;
  uint64_t seed = 1;

  std::string describe() const;
};

// Absolute + relative tolerance of an output stored as `t`.
struct Tolerance {
  double atol, rtol;
};
Tolerance tolerance_for(ScalarType t);

class AttentionCase {
 public:
  explicit AttentionCase(const CaseSpec& spec);

  // The problem in the kernel contract's terms (pointers into this object).
  PagedAttentionParams params();
  // Dense fp64 oracle output, [num_tokens, num_heads, head_size_v].
  const std::vector<double>& expected() const { return expected_; }
  // Largest tolerance violation of the kernel output (<= 0 = within tolerance); fills
  // `where` with the first failing (token, head, dim).
  double worst_violation(std::string* where) const;
  // The same against another tolerance (kernels that round more than the output).
  double worst_violation(std::string* where, Tolerance tol) const;
  // Recomputes the oracle from the current cache contents (after a cache update).
  void recompute_expected() { compute_expected(); }
  // Output element (t, h, d) as float.
  float output(int t, int h, int d) const;
  void clear_output();

  const CaseSpec& spec() const { return spec_; }
  int num_tokens() const { return num_tokens_; }
  std::vector<int32_t>& query_start_loc() { return query_start_loc_; }
  std::vector<int32_t>& seq_lens() { return seq_lens_; }
  std::vector<int32_t>& block_table() { return block_table_; }
  int max_blocks() const { return max_blocks_; }
  int num_blocks() const { return num_blocks_; }
  // Logical (dequantised) key element of request s at position k.
  double key(int s, int k, int kvh, int d) const;
  double value(int s, int k, int kvh, int d) const;

  // Raw storage (for backend tests that hand these to forward()).
  std::vector<uint8_t>& q_bytes() { return q_; }
  std::vector<uint8_t>& out_bytes() { return out_; }
  std::vector<uint8_t>& k_bytes() { return k_; }
  std::vector<uint8_t>& v_bytes() { return spec_.mla ? k_ : v_; }
  int64_t q_token_stride() const { return q_token_stride_; }
  int64_t o_token_stride() const { return o_token_stride_; }
  const std::vector<float>& sinks() const { return sinks_; }
  float softmax_scale() const { return scale_; }

 private:
  int64_t k_offset(int s, int k, int kvh) const;  // elements
  int64_t v_offset(int s, int k, int kvh) const;
  void compute_expected();

  CaseSpec spec_;
  int num_tokens_ = 0, max_blocks_ = 0, num_blocks_ = 0;
  float scale_ = 1.0f;
  std::vector<int32_t> query_start_loc_, seq_lens_, block_table_, kv_start_loc_;
  std::vector<uint8_t> q_, out_, k_, v_;
  std::vector<float> sinks_;
  int64_t q_token_stride_ = 0, o_token_stride_ = 0;
  int64_t k_block_stride_ = 0, k_token_stride_ = 0, k_head_stride_ = 0;
  int64_t v_block_stride_ = 0, v_token_stride_ = 0, v_head_stride_ = 0;
  std::vector<double> expected_;
};

}  // namespace attnkit::testing
