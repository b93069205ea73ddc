#pragma once
// Runs the REFERENCE backend through its public interface (builder + impl forward) on a
// random paged problem and computes the same problem with the dense oracle.
//
// The problem: requests with their own query and sequence lengths; each request's keys and
// values (fresh random numbers rounded to the compute dtype) for positions
// [0, seq_len - q_len) are written into the cache by the harness itself (its own
// addressing and quantisation), the last q_len positions are this step's fresh K/V that
// forward() writes. Physical blocks are handed out in a random order.

#include <cstdint>
#include <vector>

#include "attnkit/backend/backend.h"

namespace attnkit::testing {

struct PagedProblem {
  AttentionLayerParams layer;
  KvLayout layout = KvLayout::kNHD;
  int block_size = 16;
  std::vector<int> q_lens;
  std::vector<int> seq_lens;  // cross attention: encoder lengths
  uint64_t seed = 1;
  double value_magnitude = 1.0;  // q/k/v are uniform in [-m, m]
};

struct PagedRun {
  std::vector<double> out;       // [T, num_heads, head_size_v] from REFERENCE
  std::vector<double> expected;  // the same from the dense oracle
  // After forward: the cache bytes as REFERENCE left them, and as the harness expects them
  // (context written by the harness, new rows quantised by the harness).
  std::vector<uint8_t> cache_bytes;
  std::vector<uint8_t> expected_cache_bytes;
};

PagedRun run_paged(const PagedProblem& problem);

// Max over elements of |a - b| / (atol + rtol * |b|); <= 1 means within tolerance.
double tolerance_ratio(const std::vector<double>& a, const std::vector<double>& b, double rtol,
                       double atol);

// Output rounding tolerance of a compute dtype (the reference accumulates exactly and
// rounds once).
double output_rtol(DType dtype);

}  // namespace attnkit::testing
