#pragma once
// An owning, grow-only device allocation. Metadata builders keep one per step-to-step
// buffer so that forward() never allocates (CUDA-graph friendly). Defined in
// device_buffer.cu: use only in CUDA builds.

#include <cstddef>

namespace attnkit::cuda {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Makes the buffer at least `bytes` long (contents are not kept when it grows).
  void reserve(size_t bytes);
  // Synchronous host -> device copy of `bytes` at byte `offset`.
  void upload(const void* src, size_t bytes, size_t offset = 0);
  void* data() const { return data_; }
  size_t capacity() const { return capacity_; }

 private:
  void* data_ = nullptr;
  size_t capacity_ = 0;
};

}  // namespace attnkit::cuda
