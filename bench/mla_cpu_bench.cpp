// CPU_MLA decode benchmark: bf16 latent cache (576 per token), page 64, one query token per
// request, heads x batch x context as given. Reports the latent-cache read rate (GB/s of
// cache bytes the step must read) and its ratio to a read-bandwidth ceiling measured in the
// same run (an OpenMP sum over a buffer as large as the cache), plus GFLOP/s (QK and PV:
// 2 * heads * keys * (576 + 512) per request).
//
// Usage: mla_cpu_bench [iterations]   (default 5; the best iteration is reported)

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "attnkit/core/numeric.h"
#include "attnkit/kernels/cpu_isa.h"
#include "backends/cpu_mla/mla_attention.h"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Best-of-n read bandwidth (GB/s) over `bytes` bytes of 64-bit words.
double read_bandwidth(int64_t bytes, int iterations) {
  std::vector<uint64_t> buf(static_cast<size_t>(bytes / 8), 1);
  double best = 0;
  uint64_t sink = 0;
  for (int it = 0; it < iterations; ++it) {
    const auto t0 = Clock::now();
    uint64_t sum = 0;
    const auto n = static_cast<int64_t>(buf.size());
#pragma omp parallel for reduction(+ : sum) schedule(static)
    for (int64_t i = 0; i < n; ++i) sum += buf[static_cast<size_t>(i)];
    best = std::max(best, static_cast<double>(bytes) / seconds_since(t0) / 1e9);
    sink += sum;
  }
  if (sink == 42) std::printf(" ");
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 5;
  constexpr int kLatent = 576, kLora = 512, kPage = 64;
  std::printf("isa %s, %d threads\n",
              std::string(attnkit::cpu::to_string(attnkit::cpu::active_cpu_isa())).c_str(),
              omp_get_max_threads());
  std::printf(
      "| heads | batch | context | cache MB | ms | cache GB/s | read BW GB/s | %% of BW | "
      "GFLOP/s |\n|---|---|---|---|---|---|---|---|---|\n");
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (int heads : {16, 128}) {
    for (int batch : {1, 8}) {
      for (int context : {4096}) {
        const int pages = context / kPage;
        std::vector<uint16_t> cache(static_cast<size_t>(batch) * pages * kPage * kLatent);
        for (auto& x : cache) x = attnkit::float_to_bf16_bits(dist(gen));
        std::vector<uint16_t> q(static_cast<size_t>(batch) * heads * kLatent);
        for (auto& x : q) x = attnkit::float_to_bf16_bits(dist(gen));
        std::vector<uint16_t> out(static_cast<size_t>(batch) * heads * kLora);
        std::vector<int32_t> table(static_cast<size_t>(batch) * pages);
        for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
        std::shuffle(table.begin(), table.end(), gen);
        std::vector<int32_t> qsl(static_cast<size_t>(batch) + 1), lens(static_cast<size_t>(batch));
        for (int i = 0; i <= batch; ++i) qsl[static_cast<size_t>(i)] = i;
        std::fill(lens.begin(), lens.end(), context);

        attnkit::PagedAttentionParams p;
        p.q = q.data();
        p.out = out.data();
        p.q_dtype = attnkit::ScalarType::kBFloat16;
        p.q_token_stride = int64_t{heads} * kLatent;
        p.q_head_stride = kLatent;
        p.o_token_stride = int64_t{heads} * kLora;
        p.o_head_stride = kLora;
        p.k_cache = p.v_cache = cache.data();
        p.kv_dtype = attnkit::ScalarType::kBFloat16;
        p.k_block_stride = p.v_block_stride = int64_t{kPage} * kLatent;
        p.k_token_stride = p.v_token_stride = kLatent;
        p.num_seqs = batch;
        p.query_start_loc = qsl.data();
        p.seq_lens = lens.data();
        p.block_table = table.data();
        p.block_table_stride = pages;
        p.block_size = kPage;
        p.num_heads = heads;
        p.num_kv_heads = 1;
        p.head_size = kLatent;
        p.head_size_v = kLora;
        p.scale = 0.07f;
        const attnkit::cpu_mla::MlaPlan plan =
            attnkit::cpu_mla::make_mla_plan(qsl, lens, heads, attnkit::MaskRule{});
        attnkit::cpu_mla::MlaWorkspace ws;
        attnkit::cpu_mla::mla_attention(p, plan, ws);  // warm-up
        double best = 1e30;
        for (int it = 0; it < iterations; ++it) {
          const auto t0 = Clock::now();
          attnkit::cpu_mla::mla_attention(p, plan, ws);
          best = std::min(best, seconds_since(t0));
        }
        const double bytes = static_cast<double>(cache.size()) * 2;
        const double bw = read_bandwidth(static_cast<int64_t>(bytes), iterations);
        const double gbs = bytes / best / 1e9;
        const double flops = 2.0 * heads * batch * static_cast<double>(context) * (kLatent + kLora);
        std::printf("| %d | %d | %d | %.0f | %.2f | %.2f | %.2f | %.1f | %.1f |\n", heads, batch,
                    context, bytes / 1e6, best * 1e3, gbs, bw, 100.0 * gbs / bw,
                    flops / best / 1e9);
      }
    }
  }
  return 0;
}
