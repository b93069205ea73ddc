#pragma once
// Where the runner's tensors live. On a CPU platform the host tensors are handed to the
// backend as they are; on a CUDA platform each forward's Q/K/V are copied to grow-only
// device buffers, the output is written on the device and copied back (for verification
// and the checksum), and the KV cache is allocated in device memory. Memory and copies go
// through DeviceMemory, the one place the CUDA runtime is called for
// host-built tensors.

#include <memory>
#include <vector>

#include "attnkit/core/device_memory.h"
#include "attnkit/core/tensor.h"
#include "attnkit/kv_cache/kv_cache_storage.h"

namespace attnkit {

// KV-cache memory from `memory` (zero-filled, so the null block reads as zeros).
std::shared_ptr<KvMemoryAllocator> make_kv_allocator(std::shared_ptr<DeviceMemory> memory);

class DeviceIo {
 public:
  // Throws Error(kUnsupported) for CUDA when this binary has no CUDA or no device.
  explicit DeviceIo(PlatformKind platform);
  ~DeviceIo();

  bool on_host() const { return memory_ == nullptr; }
  // Memory for the KV cache (zero-filled, on the platform's device).
  std::shared_ptr<KvMemoryAllocator> kv_allocator() const;
  // `host` where the backend reads it: the host view, or a device copy in buffer `slot`.
  TensorView stage(const HostTensor& host, int slot);
  // A buffer shaped like `host` where the backend writes (the host view on the CPU).
  TensorView scratch(const HostTensor& host, int slot);
  // Copies `written` (from scratch()) back into `host` after waiting for the device.
  void fetch(const TensorView& written, const HostTensor& host);
  // Waits for the device's work (no-op on the host).
  void synchronize();

 private:
  TensorView device_view(const HostTensor& host, int slot);

  std::shared_ptr<DeviceMemory> memory_;  // null on the host
  std::vector<std::unique_ptr<DeviceBuffer>> buffers_;
};

}  // namespace attnkit
