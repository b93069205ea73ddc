// CPU_MLA decode benchmark through the library path (builder + forward, the one-token cache
// update included): bf16 latent cache (576 per token), page 64, one query token per request,
// heads x batch x context as listed. Reports the latent-cache read rate (GB/s of cache bytes
// the step must read) and its ratio to the read bandwidth measured in the same run
// (attnkit/bench/machine_ceilings.h), plus GFLOP/s (QK and PV: 2 * heads * keys * (576 +
// 512) per request) against the compute ceiling of the same run (AMX tile products or bf16
// dot products where the kernels use them, else fp32 FMA), and the share of the
// shape's roofline (the slower of reading the cache and doing its FLOPs at those ceilings). Each
// shape rotates over disjoint sets of cache blocks (>= 256 MiB in all, block tables shuffled) so
// that successive calls do not find the cache in the LLC.
//
// Usage: mla_cpu_bench [iterations] [--heads N ...] [--batch N ...] [--context N]
//   iterations: timed calls per shape (default 30; the best is reported: a one-request step
//   takes about 0.3 ms, and the best of 5 was often 15% off); by default the
//   shapes are heads {16, 128} x batch {1, 8} at context 4096.

#include <omp.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "attnkit/bench/attention_bench.h"
#include "attnkit/bench/machine_ceilings.h"
#include "attnkit/bench/mla_decode.h"
#include "attnkit/core/host_memory.h"
#include "attnkit/core/numeric.h"
#include "attnkit/core/tensor.h"
#include "attnkit/kernels/cpu_isa.h"
#include "attnkit/kernels/mla_geometry.h"
#include "attnkit/registry/registry.h"

namespace {

using namespace attnkit;
using Clock = std::chrono::steady_clock;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::vector<uint16_t> random_bf16(size_t n, std::mt19937& gen) {
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = float_to_bf16_bits(dist(gen));
  return v;
}

struct Result {
  double best_s = 0.0;
  double cache_bytes = 0.0;  // one step's latent bytes
};

Result run_shape(int heads, int batch, int context, int iterations, std::mt19937& gen) {
  constexpr int kLatent = kMlaLatentDim, kRank = kMlaValueDim, kPage = 64;
  bench::MlaDecodeShape shape;
  shape.heads = heads;
  shape.batch = batch;
  shape.context = context;
  shape.block_size = kPage;
  const int pages = shape.blocks_per_request();
  const double set_bytes = static_cast<double>(batch) * pages * kPage * kLatent * 2;
  const int sets = static_cast<int>(std::clamp(bench::kMinRotatedBytes / set_bytes + 1, 1.0, 64.0));
  const int64_t total_blocks = int64_t{sets} * batch * pages;

  // Allocated like the library's host cache storage (core/host_memory.h: 256-byte aligned,
  // huge pages), as the read ceiling's buffer is: a std::vector's 16-byte alignment made
  // every 64-byte load of a 1152-byte latent row straddle two cache lines.
  const size_t cache_elems = static_cast<size_t>(total_blocks) * kPage * kLatent;
  const std::unique_ptr<void, FreeDeleter> cache_memory(
      allocate_streamed_host_memory(cache_elems * sizeof(uint16_t), 256));
  const TensorView cache = TensorView::contiguous(cache_memory.get(), ScalarType::kBFloat16,
                                                  {total_blocks, kPage, 1, kLatent});
  {
    const std::vector<uint16_t> values = random_bf16(cache_elems, gen);
    std::copy(values.begin(), values.end(), static_cast<uint16_t*>(cache_memory.get()));
  }
  std::vector<uint16_t> q = random_bf16(static_cast<size_t>(batch) * heads * kLatent, gen);
  std::vector<uint16_t> key = random_bf16(static_cast<size_t>(batch) * kLatent, gen);
  std::vector<uint16_t> out(static_cast<size_t>(batch) * heads * kRank);

  const bench::MlaDecodePlans step =
      bench::plan_mla_decode(*BackendRegistry().get("CPU_MLA"), shape, sets, gen);

  KvCacheTensors kv;
  kv.layout = KvLayout::kNHD;
  kv.block_size = kPage;
  kv.key = cache;
  const TensorView qv =
      TensorView::contiguous(q.data(), ScalarType::kBFloat16, {batch, heads, kLatent});
  const TensorView ov =
      TensorView::contiguous(out.data(), ScalarType::kBFloat16, {batch, heads, kRank});
  const TensorView keyv =
      TensorView::contiguous(key.data(), ScalarType::kBFloat16, {batch, 1, kLatent});

  Result r;
  r.cache_bytes = static_cast<double>(batch) * context * kLatent * 2;
  step.impl->forward(qv, keyv, TensorView(), kv, *step.plans[0], ov);  // warm-up
  r.best_s = 1e30;
  for (int it = 0; it < iterations; ++it) {
    const auto t0 = Clock::now();
    const AttentionMetadata& plan = *step.plans[static_cast<size_t>((it + 1) % sets)];
    step.impl->forward(qv, keyv, TensorView(), kv, plan, ov);
    r.best_s = std::min(r.best_s, seconds_since(t0));
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"CPU_MLA decode through the library path, against the same run's ceilings"};
  int iterations = 30;
  std::vector<int> heads_list{16, 128}, batch_list{1, 8};
  int context = 4096;
  app.add_option("iterations", iterations, "timed calls per shape; the best is reported")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--heads", heads_list, "query heads (one or more)")->check(CLI::Range(1, 1024));
  app.add_option("--batch", batch_list, "requests (one or more)")->check(CLI::Range(1, 4096));
  app.add_option("--context", context, "tokens per request")->check(CLI::Range(1, 1 << 20));
  CLI11_PARSE(app, argc, argv);
  const int threads = omp_get_max_threads();
  std::printf("isa %s, %d threads\n", std::string(cpu::to_string(cpu::active_cpu_isa())).c_str(),
              threads);
  const bench::MachineCeilings ceilings = bench::measure_machine_ceilings(threads);
  const double read_bw = ceilings.read_gb_per_s;
  // The kernels' compute ceiling: with bf16 queries and cache (as here) the AVX-512 target
  // runs its AMX tile kernels where the machine has them (and ATTNKIT_CPU_AMX leaves them
  // on), else avx512_bf16's dot products where the CPU has them, else fp32 FMAs.
  const bool avx512 = cpu::active_cpu_isa() == cpu::CpuIsa::kAvx512;
  const bool amx = avx512 && cpu::amx_bf16_enabled();
  const bool dot = !amx && avx512 && cpu::avx512_bf16_dot_enabled();
  const double compute = amx   ? ceilings.amx_bf16_gflop_per_s
                         : dot ? ceilings.bf16_dot_gflop_per_s
                               : ceilings.fma_gflop_per_s;
  std::printf(
      "read bandwidth %.2f GB/s (512 MiB, best of 5, %s); fp32 FMA %.1f GFLOP/s (%s); bf16 dot "
      "%.1f GFLOP/s; AMX bf16 %.1f GFLOP/s; compute ceiling of these kernels: %s\n",
      read_bw, ceilings.read_huge_pages ? "huge pages" : "4 KiB pages", ceilings.fma_gflop_per_s,
      ceilings.fma_isa, ceilings.bf16_dot_gflop_per_s, ceilings.amx_bf16_gflop_per_s,
      amx   ? "AMX bf16"
      : dot ? "bf16 dot"
            : "fp32 FMA");
  // The roofline of a shape: the step reads each latent row once and does 2 * heads * 1088
  // FLOP on it, so it is bound by min(read bandwidth, compute rate / FLOP per byte).
  std::printf(
      "| heads | batch | context | cache MB | ms | cache GB/s | %% of read BW | GFLOP/s | "
      "%% of compute | %% of roofline |\n"
      "|---|---|---|---|---|---|---|---|---|---|\n");
  std::mt19937 gen(1);
  for (int heads : heads_list) {
    for (int batch : batch_list) {
      const Result r = run_shape(heads, batch, context, iterations, gen);
      const double gbs = r.cache_bytes / r.best_s / 1e9;
      const double flops =
          2.0 * heads * batch * static_cast<double>(context) * (kMlaLatentDim + kMlaValueDim);
      const double gflops = flops / r.best_s / 1e9;
      const double roof_s = std::max(r.cache_bytes / (read_bw * 1e9), flops / (compute * 1e9));
      std::printf("| %d | %d | %d | %.0f | %.3f | %.2f | %.1f | %.1f | %.1f | %.1f |\n", heads,
                  batch, context, r.cache_bytes / 1e6, r.best_s * 1e3, gbs, 100.0 * gbs / read_bw,
                  gflops, 100.0 * gflops / compute, 100.0 * roof_s / r.best_s);
      std::fflush(stdout);
    }
  }
  return 0;
}
