#include "runtime/device_io.h"

#include <algorithm>

namespace attnkit {
namespace {

// KV-cache memory from a DeviceMemory, zero-filled by copying zeros (DeviceMemory has no
// memset), so the null block reads as zeros as the storage expects.
class DeviceKvMemoryAllocator final : public KvMemoryAllocator {
 public:
  explicit DeviceKvMemoryAllocator(std::shared_ptr<DeviceMemory> memory)
      : memory_(std::move(memory)) {}
  Device device() const override { return memory_->device(); }
  void* allocate(size_t bytes) override {
    void* p = memory_->allocate(bytes);
    constexpr size_t kChunk = size_t{16} << 20;
    const std::vector<unsigned char> zeros(std::min(bytes, kChunk), 0);
    for (size_t off = 0; off < bytes; off += kChunk) {
      memory_->copy_to_device(static_cast<unsigned char*>(p) + off, zeros.data(),
                              std::min(kChunk, bytes - off));
    }
    return p;
  }
  void deallocate(void* ptr, size_t /*bytes*/) noexcept override { memory_->deallocate(ptr); }

 private:
  std::shared_ptr<DeviceMemory> memory_;
};

}  // namespace

std::shared_ptr<KvMemoryAllocator> make_kv_allocator(std::shared_ptr<DeviceMemory> memory) {
  return std::make_shared<DeviceKvMemoryAllocator>(std::move(memory));
}

DeviceIo::DeviceIo(PlatformKind platform) {
  if (platform == PlatformKind::kCuda) memory_ = make_cuda_memory(0);
}

DeviceIo::~DeviceIo() = default;

std::shared_ptr<KvMemoryAllocator> DeviceIo::kv_allocator() const {
  if (on_host()) return std::make_shared<HostKvMemoryAllocator>();
  return std::make_shared<DeviceKvMemoryAllocator>(memory_);
}

TensorView DeviceIo::device_view(const HostTensor& host, int slot) {
  const auto s = static_cast<size_t>(slot);
  if (buffers_.size() <= s) buffers_.resize(s + 1);
  if (!buffers_[s] || buffers_[s]->size() < host.nbytes()) {
    buffers_[s].reset();  // free first: the device may not hold both
    buffers_[s] = std::make_unique<DeviceBuffer>(*memory_, host.nbytes());
  }
  TensorView v = host.view();
  v.data = buffers_[s]->data();
  v.device = memory_->device();
  return v;
}

TensorView DeviceIo::stage(const HostTensor& host, int slot) {
  if (on_host() || host.view().empty()) return host.view();
  TensorView v = device_view(host, slot);
  memory_->copy_to_device(v.data, host.data(), host.nbytes());
  return v;
}

TensorView DeviceIo::scratch(const HostTensor& host, int slot) {
  if (on_host() || host.view().empty()) return host.view();
  return device_view(host, slot);
}

void DeviceIo::fetch(const TensorView& written, const HostTensor& host) {
  if (on_host() || written.data == host.data()) return;
  memory_->synchronize();
  memory_->copy_to_host(host.data(), written.data, host.nbytes());
}

void DeviceIo::synchronize() {
  if (!on_host()) memory_->synchronize();
}

}  // namespace attnkit
