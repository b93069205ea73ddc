#pragma once
// The buffers of one benchmark step, shared by the backend timing (attention_bench.cpp) and
// the scalar baseline (scalar_baseline.cpp): the layer, the step's common metadata (blocks
// in random physical order), the queries and fresh K/V, and the KV cache replicated into
// enough layers to exceed kMinRotatedBytes. Internal to src/bench_support.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "attnkit/backend/backend.h"
#include "attnkit/bench/attention_bench.h"
#include "attnkit/core/error.h"
#include "attnkit/core/host_memory.h"
#include "attnkit/core/tensor.h"

namespace attnkit::bench {

// A zero-filled byte buffer allocated like the library's host KV cache storage (256-byte
// aligned, huge pages from 2 MiB on: core/host_memory.h), so rows start on cache lines and
// pages are as large as in a real cache (a plain std::vector is only 16-byte aligned, which
// makes every 64-byte vector load of a row straddle two cache lines).
class AlignedBytes {
 public:
  static constexpr size_t kAlign = 256;
  AlignedBytes() = default;
  explicit AlignedBytes(size_t n) { resize(n); }
  void resize(size_t n) {
    const size_t rounded = std::max<size_t>((n + kAlign - 1) / kAlign * kAlign, kAlign);
    void* p = allocate_streamed_host_memory(rounded, kAlign);
    std::memset(p, 0, rounded);
    data_.reset(static_cast<uint8_t*>(p));
    size_ = n;
  }
  uint8_t* data() { return data_.get(); }
  const uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> data_;
  size_t size_ = 0;
};

// Every buffer of one benchmark step.
struct StepInputs {
  AttentionLayerParams layer;
  CommonAttentionMetadata common;
  ScalarType dt = ScalarType::kBFloat16, kt = ScalarType::kBFloat16;
  AlignedBytes q, out, key, value;
  std::vector<AlignedBytes> k_layers, v_layers;
  int64_t num_blocks = 0;

  // allocate_cache false: no KV cache (the caller brings its own); rotate false: one copy
  // of it (TimingOptions::cache_resident), else replicas past kMinRotatedBytes.
  StepInputs(const BenchShape& s, KvLayout layout, bool allocate_cache = true, bool rotate = true);
  TensorView tensor(AlignedBytes& b, ScalarType t, int64_t n0, int64_t n1, int64_t n2) const {
    return TensorView::contiguous(b.data(), t, {n0, n1, n2});
  }
  KvCacheTensors cache(size_t layer_index, KvLayout layout, int heads, int d) {
    KvCacheTensors c;
    c.layout = layout;
    c.block_size = common.block_size;
    const int64_t bs = common.block_size;
    auto view = [&](AlignedBytes& b) {
      return layout == KvLayout::kHND
                 ? TensorView::contiguous(b.data(), kt, {num_blocks, heads, bs, d})
                 : TensorView::contiguous(b.data(), kt, {num_blocks, bs, heads, d});
    };
    c.key = view(k_layers[layer_index]);
    c.value = view(v_layers[layer_index]);
    return c;
  }
};

// The median of `v` (the mean of the middle two for an even count).
double median(std::vector<double> v);

}  // namespace attnkit::bench
