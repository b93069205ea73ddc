// Host and CUDA implementations of DeviceMemory, and DeviceBuffer.

#include "attnkit/core/device_memory.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <utility>

#include "attnkit/build_config.h"
#include "attnkit/core/error.h"
#include "attnkit/core/tensor.h"

#if ATTNKIT_HAS_CUDA
#include <cuda_runtime_api.h>
#endif

namespace attnkit {
namespace {

class HostMemory final : public DeviceMemory {
 public:
  Device device() const override { return Device{DeviceType::kCpu, 0}; }
  void* allocate(size_t bytes) override {
    // 64-byte aligned like HostTensor, so SIMD kernels see the alignment they would in use.
    const size_t rounded = (bytes + 63) / 64 * 64 + 64;
    void* p = std::aligned_alloc(64, rounded);
    if (p == nullptr) {
      throw Error(ErrorCode::kOutOfMemory, fmt::format("cannot allocate {} host bytes", bytes));
    }
    poison_fresh_host_memory(p, rounded);
    return p;
  }
  void deallocate(void* ptr) noexcept override { std::free(ptr); }
  void copy_to_device(void* dst, const void* src, size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    if (bytes) std::memcpy(dst, src, bytes);
  }
  void synchronize() override {}
};

#if ATTNKIT_HAS_CUDA
void cuda_check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw Error(
        status == cudaErrorMemoryAllocation ? ErrorCode::kOutOfMemory : ErrorCode::kInternal,
        fmt::format("{} failed: {}", what, cudaGetErrorString(status)));
  }
}

// index -1: the device current at each call (make_current_cuda_memory).
class CudaMemory final : public DeviceMemory {
 public:
  explicit CudaMemory(int index) : index_(index) {}
  Device device() const override {
    int index = index_;
    if (index < 0) cuda_check(cudaGetDevice(&index), "cudaGetDevice");
    return Device{DeviceType::kCuda, index};
  }
  void* allocate(size_t bytes) override {
    if (index_ >= 0) cuda_check(cudaSetDevice(index_), "cudaSetDevice");
    void* p = nullptr;
    cuda_check(cudaMalloc(&p, bytes == 0 ? 1 : bytes), "cudaMalloc");
    return p;
  }
  void deallocate(void* ptr) noexcept override { cudaFree(ptr); }
  void copy_to_device(void* dst, const void* src, size_t bytes) override {
    cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    cuda_check(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
  }
  void* allocate_pinned_host(size_t bytes) override {
    if (index_ >= 0) cuda_check(cudaSetDevice(index_), "cudaSetDevice");
    void* p = nullptr;
    cuda_check(cudaHostAlloc(&p, bytes == 0 ? 1 : bytes, cudaHostAllocDefault), "cudaHostAlloc");
    return p;
  }
  void deallocate_pinned_host(void* ptr) noexcept override { cudaFreeHost(ptr); }
  void copy_to_device_async(void* dst, const void* src, size_t bytes, void* stream) override {
    if (bytes == 0) return;
    cuda_check(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, static_cast<cudaStream_t>(stream)),
        "cudaMemcpyAsync to device");
  }
  void synchronize() override { cuda_check(cudaDeviceSynchronize(), "the backend's kernels"); }

 private:
  int index_;
};
#endif

}  // namespace

std::unique_ptr<DeviceMemory> make_host_memory() { return std::make_unique<HostMemory>(); }

std::unique_ptr<DeviceMemory> make_cuda_memory(int index) {
#if ATTNKIT_HAS_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || index < 0 || index >= count) {
    cudaGetLastError();  // clear the sticky "no device" error
    throw Error(ErrorCode::kUnsupported,
                fmt::format("no CUDA device {} on this machine ({} present)", index, count));
  }
  return std::make_unique<CudaMemory>(index);
#else
  throw Error(ErrorCode::kUnsupported,
              fmt::format("cannot place tensors on CUDA device {}: this attnkit binary was "
                          "built without CUDA",
                          index));
#endif
}

std::unique_ptr<DeviceMemory> make_current_cuda_memory() {
#if ATTNKIT_HAS_CUDA
  return std::make_unique<CudaMemory>(-1);
#else
  throw Error(ErrorCode::kUnsupported,
              "cannot place tensors on a CUDA device: this attnkit binary was built without CUDA");
#endif
}

std::unique_ptr<DeviceMemory> make_device_memory(PlatformKind platform) {
  return platform == PlatformKind::kCuda ? make_cuda_memory(0) : make_host_memory();
}

DeviceBuffer::DeviceBuffer(DeviceMemory& memory, size_t bytes, MemoryKind kind)
    : memory_(&memory), kind_(kind) {
  data_ = allocate(bytes);
  bytes_ = bytes;
}

void* DeviceBuffer::allocate(size_t bytes) {
  return kind_ == MemoryKind::kPinnedHost ? memory_->allocate_pinned_host(bytes)
                                          : memory_->allocate(bytes);
}

DeviceBuffer::~DeviceBuffer() { release(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : memory_(std::exchange(other.memory_, nullptr)),
      kind_(other.kind_),
      data_(std::exchange(other.data_, nullptr)),
      bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    memory_ = std::exchange(other.memory_, nullptr);
    kind_ = other.kind_;
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::release() noexcept {
  if (data_ != nullptr) {
    if (kind_ == MemoryKind::kPinnedHost) {
      memory_->deallocate_pinned_host(data_);
    } else {
      memory_->deallocate(data_);
    }
  }
  data_ = nullptr;
  bytes_ = 0;
}

void DeviceBuffer::reserve(size_t bytes) {
  if (data_ != nullptr && bytes <= bytes_) return;
  if (memory_ == nullptr) {
    throw Error(ErrorCode::kInternal, "DeviceBuffer::reserve on a buffer with no DeviceMemory");
  }
  release();
  data_ = allocate(bytes);
  bytes_ = bytes;
}

}  // namespace attnkit
