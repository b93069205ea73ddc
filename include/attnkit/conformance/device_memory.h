#pragma once
// Where the conformance suite puts a backend's tensors. The suite builds every input on the
// host; a DeviceMemory moves them to the memory the backend's kernels read (and results
// back). CPU backends use host memory; CUDA backends use the CUDA runtime (built into this
// library when it is compiled with CUDA); any other device (e.g. a plugin's) can pass its
// own implementation in ConformanceOptions.

#include <cstddef>
#include <memory>

#include "attnkit/core/enums.h"
#include "attnkit/core/tensor.h"

namespace attnkit::conformance {

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // The device that TensorView::device names for memory from allocate().
  virtual Device device() const = 0;
  // `bytes` of device memory (bytes may be 0: return any non-null pointer). Throws
  // Error(kOutOfMemory) when it cannot.
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr) noexcept = 0;
  virtual void copy_to_device(void* dst, const void* src, size_t bytes) = 0;
  virtual void copy_to_host(void* dst, const void* src, size_t bytes) = 0;
  // Waits until the backend's work on this device is done (before results are read).
  virtual void synchronize() = 0;
};

// Plain host memory (CPU backends).
std::unique_ptr<DeviceMemory> make_host_memory();
// CUDA device `index` through the CUDA runtime. Throws Error(kUnsupported) when this
// binary has no CUDA or the device is absent.
std::unique_ptr<DeviceMemory> make_cuda_memory(int index = 0);
// The memory a backend of `platform` reads: host for CPU, CUDA device 0 for CUDA.
std::unique_ptr<DeviceMemory> make_device_memory(PlatformKind platform);

// One allocation, freed when it goes out of scope (a view never frees; this owns).
class DeviceBuffer {
 public:
  DeviceBuffer(DeviceMemory& memory, size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* data() const { return data_; }
  size_t size() const { return bytes_; }

 private:
  DeviceMemory& memory_;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace attnkit::conformance
