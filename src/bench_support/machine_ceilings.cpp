#include "attnkit/bench/machine_ceilings.h"

#include <omp.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <memory>

#include "attnkit/build_config.h"
#include "attnkit/core/error.h"
#include "attnkit/core/host_memory.h"
#include "attnkit/core/platform.h"
#include "attnkit/kernels/cpu_isa.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

// GCC 12's AVX-512 reduction intrinsics self-initialise an "undefined" register on purpose.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace attnkit::bench {
namespace {

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

using Clock = std::chrono::steady_clock;

// Results are written here so the compiler cannot drop the measured loops.
volatile double g_sink = 0.0;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// Best rate over repeats by wall clock and by CPU time per thread.
struct Rates {
  double wall = 0.0, cpu = 0.0;
  void add(double work, double wall_s, double cpu_s, int threads) {
    wall = std::max(wall, work / wall_s);
    if (cpu_s > 0) cpu = std::max(cpu, work / (cpu_s / threads));
  }
};

#if defined(__x86_64__)
// Sums 64-byte lines with 4 independent accumulators: bound by memory, not by the adds.
__attribute__((target("avx2"))) float sum_avx2(const float* p, size_t n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 32 <= n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
  }
  const __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}

// 12 independent FMA chains hide the 4-cycle latency at 2 FMAs per cycle.
__attribute__((target("avx512f"))) double fma_loop_avx512(int64_t iters) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m512 a = _mm512_set1_ps(0.999999f), b = _mm512_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
    for (__m512& x : acc) x = _mm512_fmadd_ps(x, a, b);
  }
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

__attribute__((target("avx2,fma"))) double fma_loop_avx2(int64_t iters) {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(static_cast<float>(i) * 1e-3f);
  const __m256 a = _mm256_set1_ps(0.999999f), b = _mm256_set1_ps(1e-7f);
  for (int64_t it = 0; it < iters; ++it) {
    for (__m256& x : acc) x = _mm256_fmadd_ps(x, a, b);
  }
  __m256 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0];
}

__attribute__((target("avx512f,avx512bf16"))) double bf16_dot_loop(int64_t iters) {
  __m512 acc[12];
  for (__m512& x : acc) x = _mm512_setzero_ps();
  const __m512bh a = reinterpret_cast<__m512bh>(_mm512_set1_epi16(0x3f80));  // 1.0
  const __m512bh b = reinterpret_cast<__m512bh>(_mm512_set1_epi16(0x3380));  // tiny
  for (int64_t it = 0; it < iters; ++it) {
    for (__m512& x : acc) x = _mm512_dpbf16_ps(x, a, b);
  }
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  return _mm512_reduce_add_ps(s);
}

// Four independent accumulator tiles, each iteration one tdpbf16ps into each (16 x 16 x 32
// multiply-adds, 16384 FLOP). The operands are 1.0 and a tiny value, so nothing grows large.
__attribute__((target("amx-tile,amx-bf16"))) double amx_bf16_loop(int64_t iters) {
  struct alignas(64) Config {
    uint8_t palette = 1, start_row = 0, reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
  } cfg;
  for (int t = 0; t < 6; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  alignas(64) uint16_t a[16 * 32], b[16 * 32];
  std::fill(std::begin(a), std::end(a), uint16_t{0x3f80});  // 1.0
  std::fill(std::begin(b), std::end(b), uint16_t{0x3380});  // tiny
  alignas(64) float c[16 * 16];
  __asm__ volatile("ldtilecfg %0" ::"m"(cfg));
  __asm__ volatile("tileloadd (%0,%1,1), %%tmm4" ::"r"(a), "r"(int64_t{64}) : "memory");
  __asm__ volatile("tileloadd (%0,%1,1), %%tmm5" ::"r"(b), "r"(int64_t{64}) : "memory");
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t it = 0; it < iters; ++it) {
    _tile_dpbf16ps(0, 4, 5);
    _tile_dpbf16ps(1, 4, 5);
    _tile_dpbf16ps(2, 4, 5);
    _tile_dpbf16ps(3, 4, 5);
  }
  _tile_stored(0, c, 64);
  _tile_release();
  return c[0];
}
#endif

float sum_scalar(const float* p, size_t n) {
  float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  for (size_t i = 0; i + 4 <= n; i += 4) {
    s0 += p[i];
    s1 += p[i + 1];
    s2 += p[i + 2];
    s3 += p[i + 3];
  }
  return s0 + s1 + s2 + s3;
}

double fma_loop_scalar(int64_t iters) {
  float acc[8] = {};
  for (int64_t it = 0; it < iters; ++it) {
    for (float& a : acc) a = a * 0.999999f + 1e-7f;
  }
  return acc[0] + acc[7];
}

// FLOP/s of `loop` on all threads: each thread runs `iters` iterations.
template <class F>
Rates flops_on_threads(int threads, int64_t iters, double flop_per_iter, F loop) {
  Rates best;
  for (int rep = 0; rep < 3; ++rep) {
    double sink = 0.0;
    const double c0 = process_cpu_seconds();
    const auto t0 = Clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    sink += loop(iters);
    const double s = seconds_since(t0);
    g_sink = sink;
    best.add(flop_per_iter * static_cast<double>(iters) * threads, s, process_cpu_seconds() - c0,
             threads);
  }
  return best;
}

Rates read_rates(int threads, size_t bytes, int repeats);

}  // namespace

double measure_read_bandwidth(int threads, size_t bytes, int repeats) {
  return read_rates(threads, bytes, repeats).wall / 1e9;
}

namespace {

Rates read_rates(int threads, size_t bytes, int repeats) {
  const size_t n = bytes / sizeof(float);
  // Allocated as the host KV cache is (huge pages from 2 MiB on, core/host_memory.h), so
  // the ceiling and the kernels it is set against read through the same kind of pages;
  // first touched by the threads that will read it.
  const std::unique_ptr<float, FreeDeleter> storage(
      static_cast<float*>(allocate_streamed_host_memory(std::max<size_t>(n, 1) * sizeof(float))));
  float* buf = storage.get();
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int64_t i = 0; i < static_cast<int64_t>(n); ++i) buf[i] = static_cast<float>(i & 7);
#if defined(__x86_64__)
  const bool avx2 = detect_cpu_features().avx2;
#endif
  Rates best;
  for (int rep = 0; rep < repeats; ++rep) {
    float total = 0.0f;
    const double c0 = process_cpu_seconds();
    const auto t0 = Clock::now();
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      const size_t per = n / static_cast<size_t>(nt) / 32 * 32;
      const float* p = buf + per * static_cast<size_t>(t);
#if defined(__x86_64__)
      total += avx2 ? sum_avx2(p, per) : sum_scalar(p, per);
#else
      total += sum_scalar(p, per);
#endif
    }
    const double s = seconds_since(t0);
    g_sink = total;
    const size_t counted = n / 32 * 32;  // floats counted as read: whole 32-float blocks
    best.add(static_cast<double>(counted) * sizeof(float), s, process_cpu_seconds() - c0, threads);
  }
  return best;
}

}  // namespace

MachineCeilings measure_machine_ceilings(int threads, size_t read_bytes) {
  MachineCeilings c;
  c.threads = threads;
  const Rates read = read_rates(threads, read_bytes, 5);
  c.read_gb_per_s = read.wall / 1e9;
  c.read_gb_per_s_cpu = read.cpu / 1e9;
  c.read_huge_pages = read_bytes >= kHugePageBytes && streamed_host_memory_uses_huge_pages();
  auto set_fma = [&c](Rates r) {
    c.fma_gflop_per_s = r.wall / 1e9;
    c.fma_gflop_per_s_cpu = r.cpu / 1e9;
  };
  const int64_t iters = 20'000'000;
#if defined(__x86_64__)
  // The ceilings of the ISA the kernels run (cpu::active_cpu_isa(), which ATTNKIT_CPU_ISA
  // may force below the machine's best): AVX2 kernels on an AVX-512 machine are held to the
  // 256-bit FMA rate (half the 512-bit one where a core has two 512-bit FMA units), and to
  // no bf16 dot ceiling, since they take no dot products.
  const cpu::CpuIsa isa = cpu::active_cpu_isa();
  if (isa == cpu::CpuIsa::kAvx512) {
    c.fma_isa = "avx512";
    set_fma(flops_on_threads(threads, iters, 12 * 32.0, fma_loop_avx512));
  } else if (isa == cpu::CpuIsa::kAvx2) {
    c.fma_isa = "avx2";
    set_fma(flops_on_threads(threads, iters, 12 * 16.0, fma_loop_avx2));
  } else {
    set_fma(flops_on_threads(threads, iters / 8, 8 * 2.0, fma_loop_scalar));
  }
  if (isa == cpu::CpuIsa::kAvx512 && cpu::avx512_bf16_dot_enabled()) {
    const Rates r = flops_on_threads(threads, iters, 12 * 64.0, bf16_dot_loop);
    c.bf16_dot_gflop_per_s = r.wall / 1e9;
    c.bf16_dot_gflop_per_s_cpu = r.cpu / 1e9;
  }
  if (isa == cpu::CpuIsa::kAvx512 && cpu::amx_bf16_enabled()) {
    const Rates r = flops_on_threads(threads, iters / 64, 4 * 16384.0, amx_bf16_loop);
    c.amx_bf16_gflop_per_s = r.wall / 1e9;
    c.amx_bf16_gflop_per_s_cpu = r.cpu / 1e9;
  }
#else
  set_fma(flops_on_threads(threads, iters / 8, 8 * 2.0, fma_loop_scalar));
#endif
  return c;
}

int graph_replay_calls(int sets, double per_call_ms) {
  const int rounds = static_cast<int>(std::ceil(3.0 / std::max(per_call_ms * sets, 1e-3)));
  return std::min(sets * std::max(1, rounds), std::max(sets, 1024));
}

#if !ATTNKIT_HAS_CUDA
// With CUDA, gpu_read_bandwidth.cu defines them.
double measure_gpu_read_bandwidth(size_t /*bytes*/, int /*repeats*/) {
  throw Error(ErrorCode::kUnsupported,
              "no GPU read bandwidth: this attnkit binary was built without CUDA");
}
double measure_gpu_read_step_ms(size_t /*bytes*/, int /*sets*/) {
  throw Error(ErrorCode::kUnsupported,
              "no GPU read step time: this attnkit binary was built without CUDA");
}
#endif

}  // namespace attnkit::bench
