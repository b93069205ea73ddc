#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"

namespace attnkit::cuda {

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cudaFree(data_);  // no throwing from a destructor
}

void DeviceBuffer::reserve(size_t bytes) {
  if (bytes <= capacity_) return;
  if (data_ != nullptr) {
    ATTNKIT_CUDA_CHECK(cudaFree(data_));
    data_ = nullptr;
    capacity_ = 0;
  }
  // Grow by half again so that slowly growing batches do not reallocate every step.
  const size_t size = bytes + bytes / 2;
  ATTNKIT_CUDA_CHECK(cudaMalloc(&data_, size));
  capacity_ = size;
}

void DeviceBuffer::upload(const void* src, size_t bytes, size_t offset) {
  if (bytes == 0) return;
  ATTNKIT_CUDA_CHECK(
      cudaMemcpy(static_cast<char*>(data_) + offset, src, bytes, cudaMemcpyHostToDevice));
}

}  // namespace attnkit::cuda
