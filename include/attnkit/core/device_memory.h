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
#include "attnkit/export.h"

namespace attnkit {

// Where a DeviceBuffer's memory lives: on the device, or in page-locked host memory that
// the device copies from asynchronously (the staging of a builder's uploads).
enum class MemoryKind { kDevice, kPinnedHost };

class ATTNKIT_API DeviceMemory {
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
  // Page-locked host memory for asynchronous uploads. Default: plain host memory (a device
  // that reads host memory directly needs nothing more).
  virtual void* allocate_pinned_host(size_t bytes) { return allocate(bytes); }
  virtual void deallocate_pinned_host(void* ptr) noexcept { deallocate(ptr); }
  // Enqueues a host->device copy on `stream` (a cudaStream_t for CUDA; nullptr = the
  // default stream) and returns without waiting; `src` must stay unchanged until the copy
  // has run. Default: the synchronous copy.
  virtual void copy_to_device_async(void* dst, const void* src, size_t bytes, void* /*stream*/) {
    copy_to_device(dst, src, bytes);
  }
  // Waits until the backend's work on this device is done (before results are read).
  virtual void synchronize() = 0;
};

// Plain host memory (CPU backends).
ATTNKIT_API std::unique_ptr<DeviceMemory> make_host_memory();
// CUDA device `index` through the CUDA runtime. Throws Error(kUnsupported) when this
// binary has no CUDA or the device is absent.
ATTNKIT_API std::unique_ptr<DeviceMemory> make_cuda_memory(int index = 0);
// Whichever CUDA device is current on the calling thread when memory is allocated (the
// caller chooses it with cudaSetDevice; nothing here changes it). Throws like
// make_cuda_memory() when this binary has no CUDA.
ATTNKIT_API std::unique_ptr<DeviceMemory> make_current_cuda_memory();
// The memory a backend of `platform` reads: host for CPU, CUDA device 0 for CUDA.
ATTNKIT_API std::unique_ptr<DeviceMemory> make_device_memory(PlatformKind platform);

// One allocation from a DeviceMemory, freed when it goes out of scope (a view never frees;
// this owns). Move-only. reserve() grows it (never shrinks), so a buffer kept from step to
// step stops allocating once it has seen the largest step.
class ATTNKIT_API DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // An empty buffer that allocates from `memory` (which must outlive it) on reserve().
  explicit DeviceBuffer(DeviceMemory& memory, MemoryKind kind = MemoryKind::kDevice)
      : memory_(&memory), kind_(kind) {}
  DeviceBuffer(DeviceMemory& memory, size_t bytes, MemoryKind kind = MemoryKind::kDevice);
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
  MemoryKind kind() const { return kind_; }

 private:
  void* allocate(size_t bytes);
  void release() noexcept;

  DeviceMemory* memory_ = nullptr;
  MemoryKind kind_ = MemoryKind::kDevice;
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace attnkit
