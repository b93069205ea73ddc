#pragma once
// Device memory: the one place attnkit allocates, frees and copies memory that a backend's
// kernels read. A DeviceMemory is a device's allocator and copier (host memory for CPU
// backends; the CUDA runtime for CUDA devices, when this library is built with CUDA; any
// other device, e.g. a plugin's, can bring its own implementation); a DeviceBuffer owns one
// allocation from it. The runtime, the backends' metadata builders, the conformance suite
// and the benchmarks all use these two types.

#include <cstddef>
#include <memory>

#include "attnkit/core/enums.h"
#include "attnkit/core/tensor.h"

namespace attnkit {

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
// Whichever CUDA device is current on the calling thread when memory is allocated (the
// caller chooses it with cudaSetDevice; nothing here changes it). Throws like
// make_cuda_memory() when this binary has no CUDA.
std::unique_ptr<DeviceMemory> make_current_cuda_memory();
// The memory a backend of `platform` reads: host for CPU, CUDA device 0 for CUDA.
std::unique_ptr<DeviceMemory> make_device_memory(PlatformKind platform);

// One allocation from a DeviceMemory, freed when it goes out of scope (a view never frees;
// this owns). Move-only. reserve() grows it (never shrinks), so a buffer kept from step to
// step stops allocating once it has seen the largest step.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // An empty buffer that allocates from `memory` (which must outlive it) on reserve().
  explicit DeviceBuffer(DeviceMemory& memory) : memory_(&memory) {}
  DeviceBuffer(DeviceMemory& memory, size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Makes the buffer at least `bytes` long; its contents are not kept when it grows.
  void reserve(size_t bytes);
  void* data() const { return data_; }
  size_t size() const { return bytes_; }
  DeviceMemory* memory() const { return memory_; }

 private:
  void release() noexcept;

  DeviceMemory* memory_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace attnkit
