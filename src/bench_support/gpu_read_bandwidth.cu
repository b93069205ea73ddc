// The GPU read ceiling of the benchmarks: a streaming read-only kernel (16-byte loads,
// grid-stride, one partial sum per thread folded into a value the host reads, so that
// nothing is optimised away), over a buffer far larger than L2, timed with CUDA events.
// A copy rate counts a write per read and is not this ceiling.
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "attnkit/bench/machine_ceilings.h"
#include "attnkit/core/device_memory.h"
#include "kernels/cuda/cuda_check.h"

namespace attnkit::bench {
namespace {

__global__ void read_kernel(const uint4* __restrict__ data, size_t n, unsigned* sink) {
  unsigned acc = 0;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const uint4 v = __ldcs(data + i);  // streaming: no reuse, evict first
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) *sink = acc;  // never true for the zero-filled buffer, but kept
}

}  // namespace

double measure_gpu_read_bandwidth(size_t bytes, int repeats) {
  int device = 0, sms = 0;
  ATTNKIT_CUDA_CHECK(cudaGetDevice(&device));
  ATTNKIT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const size_t n = bytes / sizeof(uint4);
  // Owned by core's DeviceBuffer (freed on every path out, an error included).
  const std::unique_ptr<DeviceMemory> memory = make_current_cuda_memory();
  const DeviceBuffer buffer(*memory, n * sizeof(uint4));
  const DeviceBuffer sink_buffer(*memory, sizeof(unsigned));
  const auto* data = static_cast<const uint4*>(buffer.data());
  auto* sink = static_cast<unsigned*>(sink_buffer.data());
  ATTNKIT_CUDA_CHECK(cudaMemset(buffer.data(), 0, n * sizeof(uint4)));
  cudaEvent_t start = nullptr, stop = nullptr;
  ATTNKIT_CUDA_CHECK(cudaEventCreate(&start));
  ATTNKIT_CUDA_CHECK(cudaEventCreate(&stop));
  const dim3 grid(static_cast<unsigned>(sms) * 8), block(512);
  read_kernel<<<grid, block>>>(data, n, sink);  // warm-up
  ATTNKIT_CUDA_CHECK_LAUNCH(read_kernel);
  std::vector<double> rates;
  for (int r = 0; r < std::max(repeats, 1); ++r) {
    ATTNKIT_CUDA_CHECK(cudaEventRecord(start));
    read_kernel<<<grid, block>>>(data, n, sink);
    ATTNKIT_CUDA_CHECK_LAUNCH(read_kernel);
    ATTNKIT_CUDA_CHECK(cudaEventRecord(stop));
    ATTNKIT_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    ATTNKIT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    rates.push_back(static_cast<double>(n * sizeof(uint4)) / (ms * 1e-3) / 1e9);
  }
  ATTNKIT_CUDA_CHECK(cudaEventDestroy(start));
  ATTNKIT_CUDA_CHECK(cudaEventDestroy(stop));
  return *std::max_element(rates.begin(), rates.end());
}

}  // namespace attnkit::bench
