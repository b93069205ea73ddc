// The GPU read ceiling of the benchmarks: a streaming read-only kernel (16-byte loads,
// grid-stride, one partial sum per thread folded into a value the host reads, so that
// nothing is optimised away), over a buffer far larger than L2, timed with CUDA events.
// A copy rate counts a write per read and is not this ceiling.
//
// The same kernel, on the same grid, also times one read of a decode step's own K/V bytes
// (measure_gpu_read_step_ms): launched from a CUDA graph over `sets` disjoint buffers in
// turn, as the benchmark replays its steps over disjoint KV sets, so that no launch finds
// its bytes in L2.
#include <cuda_runtime.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "attnkit/bench/machine_ceilings.h"
#include "attnkit/core/device_memory.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_plan.h"

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

// `sets` disjoint zero-filled buffers of `bytes` (rounded down to 16-byte loads) in one
// allocation owned by core's DeviceBuffer (freed on every path out, an error included), the
// sink, and the launch every measurement uses: 8 CTAs of 512 threads per SM, grid-stride.
struct ReadBuffers {
  ReadBuffers(size_t bytes, int sets)
      : loads(bytes / sizeof(uint4)),
        // Each buffer starts on a 256-byte boundary, as a KV-cache allocation does.
        stride((loads * sizeof(uint4) + 255) / 256 * 256),
        count(std::max(sets, 1)),
        memory(make_current_cuda_memory()),
        buffer(*memory, stride * static_cast<size_t>(count)),
        sink_buffer(*memory, sizeof(unsigned)),
        grid(static_cast<unsigned>(cuda::current_device_sm_count()) * 8),
        block(512) {
    ATTNKIT_CUDA_CHECK(cudaMemset(buffer.data(), 0, stride * static_cast<size_t>(count)));
  }
  size_t bytes() const { return loads * sizeof(uint4); }
  // One read of buffer `set` on `stream`.
  void read(int set, cudaStream_t stream) const {
    const auto* data = reinterpret_cast<const uint4*>(static_cast<const char*>(buffer.data()) +
                                                      stride * static_cast<size_t>(set));
    read_kernel<<<grid, block, 0, stream>>>(data, loads,
                                            static_cast<unsigned*>(sink_buffer.data()));
    ATTNKIT_CUDA_CHECK_LAUNCH(read_kernel);
  }

  size_t loads, stride;
  int count;
  std::unique_ptr<DeviceMemory> memory;
  DeviceBuffer buffer, sink_buffer;
  dim3 grid, block;
};

// Milliseconds between two events recorded around `launch` on `stream`.
template <typename F>
float timed_ms(cudaStream_t stream, cudaEvent_t start, cudaEvent_t stop, F&& launch) {
  ATTNKIT_CUDA_CHECK(cudaEventRecord(start, stream));
  launch();
  ATTNKIT_CUDA_CHECK(cudaEventRecord(stop, stream));
  ATTNKIT_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  ATTNKIT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  return ms;
}

}  // namespace

double measure_gpu_read_bandwidth(size_t bytes, int repeats) {
  const ReadBuffers buffers(bytes, 1);
  cudaEvent_t start = nullptr, stop = nullptr;
  ATTNKIT_CUDA_CHECK(cudaEventCreate(&start));
  ATTNKIT_CUDA_CHECK(cudaEventCreate(&stop));
  buffers.read(0, nullptr);  // warm-up
  std::vector<double> rates;
  for (int r = 0; r < std::max(repeats, 1); ++r) {
    const float ms = timed_ms(nullptr, start, stop, [&] { buffers.read(0, nullptr); });
    rates.push_back(static_cast<double>(buffers.bytes()) / (ms * 1e-3) / 1e9);
  }
  ATTNKIT_CUDA_CHECK(cudaEventDestroy(start));
  ATTNKIT_CUDA_CHECK(cudaEventDestroy(stop));
  return *std::max_element(rates.begin(), rates.end());
}

double measure_gpu_read_step_ms(size_t bytes, int sets) {
  const ReadBuffers buffers(bytes, sets);
  const int count = buffers.count;
  cudaStream_t stream = nullptr;
  ATTNKIT_CUDA_CHECK(cudaStreamCreate(&stream));  // blocking: the events order with it
  cudaEvent_t start = nullptr, stop = nullptr;
  ATTNKIT_CUDA_CHECK(cudaEventCreate(&start));
  ATTNKIT_CUDA_CHECK(cudaEventCreate(&stop));
  // One eager pass over the sets (the first also loads the kernel) sizes the graph as
  // cuda_attention_bench sizes its own (graph_replay_calls).
  for (int set = 0; set < count; ++set) buffers.read(set, stream);
  const float eager_ms = timed_ms(stream, start, stop, [&] {
    for (int set = 0; set < count; ++set) buffers.read(set, stream);
  });
  const int n = graph_replay_calls(count, static_cast<double>(eager_ms) / count);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ATTNKIT_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  for (int i = 0; i < n; ++i) buffers.read(i % count, stream);
  ATTNKIT_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  ATTNKIT_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  ATTNKIT_CUDA_CHECK(cudaGraphDestroy(graph));
  ATTNKIT_CUDA_CHECK(cudaGraphLaunch(exec, stream));  // warm-up
  std::vector<double> times;
  for (int rep = 0; rep < 7; ++rep) {
    const float ms =
        timed_ms(stream, start, stop, [&] { ATTNKIT_CUDA_CHECK(cudaGraphLaunch(exec, stream)); });
    times.push_back(static_cast<double>(ms) / n);
  }
  ATTNKIT_CUDA_CHECK(cudaGraphExecDestroy(exec));
  ATTNKIT_CUDA_CHECK(cudaEventDestroy(start));
  ATTNKIT_CUDA_CHECK(cudaEventDestroy(stop));
  ATTNKIT_CUDA_CHECK(cudaStreamDestroy(stream));
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace attnkit::bench
