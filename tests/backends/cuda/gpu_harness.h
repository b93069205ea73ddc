#pragma once
// GPU conformance harness for the CUDA backends: builds a random batch (fresh random
// inputs every run), a paged cache with shuffled block ids and NaN-poisoned unused slots,
// runs the backend's builder + forward on the device (cache update included), and compares
// with an independent fp64 dense attention computed on the host from the values the
// kernels can see (inputs rounded to the compute dtype, K/V through the cache dtype).

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "attnkit/core/enums.h"

namespace attnkit::testing {

struct GpuCase {
  std::string backend = "CUDA_FLASH";
  DType dtype = DType::kBFloat16;
  KvCacheDType kv_dtype = KvCacheDType::kAuto;
  int num_heads = 8;
  int num_kv_heads = 2;
  int head_size = 128;
  int block_size = 16;
  KvLayout layout = KvLayout::kNHD;
  AttentionType attn_type = AttentionType::kDecoder;
  int sliding_window = 0;
  int chunk_size = 0;
  float soft_cap = 0.0f;
  bool sinks = false;
  float k_scale = 1.0f;
  float v_scale = 1.0f;
  float q_range = 1.0f;  // queries uniform in [-q_range, q_range] (sharper softmax when larger)
  std::vector<std::pair<int, int>> requests;  // (q_len, kv_len)
  std::string describe() const;
};

struct GpuResult {
  double rel_l2 = 0;             // ||out - ref|| / ||ref||
  double max_abs = 0;            // max |out - ref|
  int64_t non_finite = 0;        // outputs that are NaN/inf (poisoned and never written)
  int64_t cache_mismatches = 0;  // fresh K/V bytes in the cache that differ from expected
  int64_t outputs = 0;
};

// True when a CUDA device is usable by this binary.
bool gpu_available();
GpuResult run_gpu_case(const GpuCase& c);

}  // namespace attnkit::testing
