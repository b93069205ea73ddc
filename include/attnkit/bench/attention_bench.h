#pragma once
// One attention benchmark shape run through any registered backend: fresh random inputs
// (queries, a paged KV cache with blocks in random physical order, the step's new K/V),
// warm-up, then the median of timed forward() calls (cache update + attention, the plan
// built once beforehand as in a real step). Shared by bench/cpu_attention_bench.cpp and
// `attnkit bench`; the scalar peer it compares against is scalar_baseline.h.
//
// To keep the KV cache from living in the last-level cache between repeats (a real model
// reads other layers' KV in between), the cache is replicated into enough "layers" that
// their total exceeds kMinRotatedBytes, and successive repeats visit successive layers.

#include <cstdint>
#include <string>
#include <vector>

#include "attnkit/backend/backend.h"
#include "attnkit/core/enums.h"
#include "attnkit/export.h"

namespace attnkit::bench {

struct ATTNKIT_API BenchShape {
  std::string name;  // label for reports
  int num_heads = 32, num_kv_heads = 8, head_size = 128;
  // Per request: query tokens this step and keys attended over (seq_len, including them).
  std::vector<int> q_lens{1};
  std::vector<int> kv_lens{4096};
  bool sinks = false;
  // Causal decoder self-attention (the new tokens are the last of each request), or
  // non-causal cross attention over an already filled cache (no cache update).
  bool causal = true;
  DType dtype = DType::kBFloat16;
  KvCacheDType kv_cache_dtype = KvCacheDType::kAuto;
  int block_size = 16;

  // `batch` requests of `query_len` new tokens at context `context`.
  static BenchShape uniform(std::string name, int heads, int kv_heads, int head_size, int batch,
                            int context, int query_len);
  std::string describe() const;
};

// Work of one forward(): unique KV bytes the requests' visible ranges cover, and FLOPs of
// QK^T plus PV over visible (query, key) pairs (2 per multiply-add).
struct ATTNKIT_API BenchWork {
  double kv_bytes = 0.0;
  double flops = 0.0;
  int64_t tokens = 0;
};
ATTNKIT_API BenchWork bench_work(const BenchShape& shape);

struct ATTNKIT_API TimingOptions {
  int warmup = 2;
  int repeats = 9;
  double min_seconds = 0.0;  // keep repeating until at least this long in total
  // One copy of the KV cache, read by every repeat (it stays in the CPU's caches when it
  // fits), instead of replicas rotated through past kMinRotatedBytes. For comparing two
  // builds of a kernel by its instruction stream; its rates are not DRAM figures.
  bool cache_resident = false;
};

struct ATTNKIT_API Timing {
  double median_us = 0.0;
  double min_us = 0.0;
  double median_cpu_us = 0.0;  // process CPU time (all threads) of the median-time repeat
  double min_cpu_us = 0.0;     // least process CPU time (all threads) of any repeat
  int repeats = 0;
  int layers = 1;  // KV replicas rotated through
  // Where it ran: "cpu", or the CUDA platform (e.g. "cuda:9.0 (NVIDIA H200)").
  std::string device = "cpu";
};

// Times `backend` on `shape` (forward() only; metadata built once) where it runs: this CPU,
// or CUDA device 0 for a CUDA backend (inputs copied there, each repeat a run of forwards
// back to back then one wait, reported per forward). Throws Error if the backend cannot
// serve the shape (with its reasons) or cannot run here (no device, not in this binary).
ATTNKIT_API Timing time_backend(const AttentionBackend& backend, const BenchShape& shape,
                                const TimingOptions& options);

// A shape with one KV head and its query group (for timing slow peers on a sample of the
// heads; multiply the time by shape.num_kv_heads).
ATTNKIT_API BenchShape one_kv_head(const BenchShape& shape);

// The numbers a benchmark prints for one shape, as fractions of the machine's ceilings.
struct ATTNKIT_API BenchReport {
  double median_us = 0.0, min_us = 0.0;
  double kv_gb_per_s = 0.0, gflop_per_s = 0.0;
  double read_ratio = 0.0;                // kv_gb_per_s / measured read bandwidth
  double flop_ceiling_gflop_per_s = 0.0;  // bf16-dot ceiling for bf16 x bf16, else FMA
  double flop_ratio = 0.0;
  // The same by CPU time (least CPU time of a repeat, per thread) against the ceilings'
  // CPU-time rates: what the ratios would be on an otherwise idle machine.
  double kv_gb_per_s_cpu = 0.0, gflop_per_s_cpu = 0.0;
  double read_ratio_cpu = 0.0, flop_ratio_cpu = 0.0;
};
struct MachineCeilings;
ATTNKIT_API BenchReport make_report(const BenchShape& shape, const Timing& timing,
                                    const MachineCeilings& ceilings);

inline constexpr double kMinRotatedBytes = 256.0 * (1 << 20);

}  // namespace attnkit::bench
