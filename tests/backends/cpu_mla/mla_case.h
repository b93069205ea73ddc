#pragma once
// A reusable MLA step for the CPU_MLA tests: random latent vectors and absorbed queries for
// a batch of requests (prefill, chunk and decode rows mixed), a scrambled paged latent
// cache already holding each request's earlier tokens, and one forward() through any
// backend. The same case run through REFERENCE is the oracle.

#include <cstdint>
#include <random>
#include <vector>

#include "attnkit/backend/backend.h"
#include "attnkit/core/tensor.h"

namespace attnkit::testing {

struct MlaRequest {
  int q_len = 1;    // new tokens this step
  int seq_len = 1;  // tokens after this step
};

struct MlaCase {
  std::vector<MlaRequest> requests;
  int num_heads = 16;
  int block_size = 16;
  int sliding_window = 0;
  DType dtype = DType::kFloat32;
  KvCacheDType kv_dtype = KvCacheDType::kFloat32;
  float k_scale = 1.0f;
  uint64_t seed = 1;
};

inline constexpr int kLatent = 576, kLora = 512;

// Output [tokens, heads, 512] of `backend` on `c` as fp32, after filling its cache with the
// case's history (written through the backend's own forward in one prefill step per
// request) and running the case's step.
std::vector<float> run_mla_case(const AttentionBackend& backend, const MlaCase& c);

// The layer the case describes.
AttentionLayerParams mla_layer(const MlaCase& c);

}  // namespace attnkit::testing
