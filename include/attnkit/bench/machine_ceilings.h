#pragma once
// What this machine can do at best, measured in the same run as a benchmark so that the
// benchmark's numbers are reported as fractions of them:
//   - memory read bandwidth: a streaming read (sum) over a buffer far larger than the
//     caches, on all threads, allocated as host KV caches are (huge pages where they are);
//   - FLOP ceilings: register-resident loops of independent fp32 FMAs, and of avx512_bf16
//     dot products (vdpbf16ps, 64 FLOP each), on all threads, with the SIMD width of the
//     ISA the CPU kernels run (cpu::active_cpu_isa(), ATTNKIT_CPU_ISA): forced AVX2 kernels
//     are measured against the 256-bit FMA loop and get no bf16 dot ceiling; and, where the
//     avx512 target runs AMX tile kernels (cpu::amx_bf16_enabled()), a loop of independent
//     AMX-BF16 tile products (tdpbf16ps, 16 x 16 x 32 multiply-adds each).
// Each is also measured per CPU-second ("_cpu": work / (process CPU time / threads)), which
// a machine shared with other jobs does not depress the way it depresses wall-clock rates:
// a benchmark's CPU-time rate over these is a ratio both sides of which exclude the time
// the threads waited for a core.

#include <cstddef>

#include "attnkit/export.h"

namespace attnkit::bench {

struct ATTNKIT_API MachineCeilings {
  int threads = 1;
  double read_gb_per_s = 0.0;         // 1e9 bytes per second
  double fma_gflop_per_s = 0.0;       // fp32 FMA, 2 FLOP per lane
  double bf16_dot_gflop_per_s = 0.0;  // 0 without avx512_bf16, or with other kernels active
  const char* fma_isa = "scalar";     // the ISA the FMA loop ran with
  double amx_bf16_gflop_per_s = 0.0;  // 0 where the AMX tile kernels do not run
  // The same per CPU-second of each thread (see above).
  double read_gb_per_s_cpu = 0.0;
  double fma_gflop_per_s_cpu = 0.0;
  double bf16_dot_gflop_per_s_cpu = 0.0;
  double amx_bf16_gflop_per_s_cpu = 0.0;
  // The read buffer was advised for transparent huge pages, as host KV caches are
  // (attnkit/core/host_memory.h, ATTNKIT_HUGE_PAGES).
  bool read_huge_pages = false;
};

// Measures all ceilings with `threads` OpenMP threads; the read buffer is `read_bytes`.
ATTNKIT_API MachineCeilings measure_machine_ceilings(int threads,
                                                     size_t read_bytes = size_t{512} << 20);

// Just the read bandwidth (best of `repeats` passes over `bytes`).
ATTNKIT_API double measure_read_bandwidth(int threads, size_t bytes, int repeats = 5);

// The current CUDA device's read bandwidth in 1e9 bytes per second: a streaming read-only
// kernel over `bytes` of device memory (best of `repeats`). The read ceiling of a decode
// step, which reads its KV cache once (a device-to-device copy also writes, so it is not).
// Throws Error(kUnsupported) in a binary without CUDA.
ATTNKIT_API double measure_gpu_read_bandwidth(size_t bytes = size_t{2} << 30, int repeats = 10);

// The time in milliseconds of one read of `bytes` on the current CUDA device by the same
// streaming kernel and grid as measure_gpu_read_bandwidth: the median over CUDA-graph
// replays of back-to-back reads, each of the next of `sets` disjoint buffers of `bytes`,
// as a benchmark replays decode steps over disjoint KV sets (so no read finds its bytes in
// L2). With `bytes` a decode step's own K/V bytes it is the least a one-launch step can
// take, launch, ramp-up and tail included. Throws Error(kUnsupported) in a binary without
// CUDA.
ATTNKIT_API double measure_gpu_read_step_ms(size_t bytes, int sets);

// Calls one CUDA graph holds when a benchmark times `sets` rotating inputs by graph replay:
// a multiple of `sets` such that one replay lasts at least ~3 ms at `per_call_ms` per call,
// and at most max(sets, 1024). measure_gpu_read_step_ms and cuda_attention_bench size their
// graphs by it.
ATTNKIT_API int graph_replay_calls(int sets, double per_call_ms);

}  // namespace attnkit::bench
