#pragma once
// Timing helpers shared by the CUDA benchmarks: checked CUDA calls, device buffers,
// device memory filled from a host pattern, event-timed medians and the device-to-device
// copy bandwidth that every CUDA figure is compared with. Only compiled with CUDA.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "attnkit/core/device_memory.h"

namespace attnkit::bench {

// A benchmark cannot go on after a failed CUDA call: report it and stop.
inline void check(cudaError_t s, const char* what) {
  if (s != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(s));
    std::exit(1);
  }
}

// `bytes` of memory on CUDA device 0, owned (core/device_memory.h: the library's one owner
// type; it throws Error when the device cannot give them).
inline DeviceBuffer device_buffer(size_t bytes) {
  static const std::unique_ptr<DeviceMemory> memory = make_cuda_memory(0);
  return DeviceBuffer(*memory, bytes);
}

// Fills `bytes` of device memory with `pattern` repeated (the values only need to be
// realistic, not independent, so a 16 MiB random pattern serves gigabytes of cache).
template <typename E>
void fill_repeated(void* dst, size_t bytes, const std::vector<E>& pattern) {
  const size_t chunk = pattern.size() * sizeof(E);
  for (size_t off = 0; off < bytes; off += chunk) {
    check(cudaMemcpy(static_cast<char*>(dst) + off, pattern.data(), std::min(chunk, bytes - off),
                     cudaMemcpyHostToDevice),
          "fill");
  }
}

// Median over 7 batches of the mean time per call; each batch lasts about 25 ms. `run`
// gets the call's index, so callers can rotate over disjoint inputs.
template <typename F>
double median_ms(F&& run) {
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "event");
  check(cudaEventCreate(&b), "event");
  run(0);
  check(cudaDeviceSynchronize(), "warmup");
  check(cudaEventRecord(a), "record");
  run(1);
  check(cudaEventRecord(b), "record");
  check(cudaEventSynchronize(b), "sync");
  float once = 0;
  check(cudaEventElapsedTime(&once, a, b), "elapsed");
  const int iters_per_batch =
      static_cast<int>(std::clamp(25.0 / std::max(once, 1e-3f), 1.0, 500.0));
  std::vector<double> times;
  int call = 2;
  for (int rep = 0; rep < 7; ++rep) {
    check(cudaEventRecord(a), "record");
    for (int i = 0; i < iters_per_batch; ++i) run(call++);
    check(cudaEventRecord(b), "record");
    check(cudaEventSynchronize(b), "sync");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, a, b), "elapsed");
    times.push_back(ms / iters_per_batch);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Device-to-device copy of 2 GiB, counted as bytes read + written per second.
inline double copy_bandwidth_gbs() {
  const size_t bytes = size_t{2} << 30;
  DeviceBuffer src = device_buffer(bytes), dst = device_buffer(bytes);
  check(cudaMemset(src.data(), 1, bytes), "memset");
  const double ms = median_ms([&](int) {
    check(cudaMemcpy(dst.data(), src.data(), bytes, cudaMemcpyDeviceToDevice), "copy");
  });
  return 2.0 * static_cast<double>(bytes) / (ms * 1e-3) / 1e9;
}

}  // namespace attnkit::bench
