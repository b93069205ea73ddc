#pragma once
// The memory of the paged KV cache and the per-layer views handed to forward().
//
// Buffer layout. The cache owns KvCacheConfig::num_buffers buffers of
// num_blocks * page_size_bytes bytes each; layer j of every group uses buffer j. Cache
// block b of a layer is the byte range [b * page, (b + 1) * page), so a block id owned by
// one group never overlaps another group's blocks, whatever their specs.
// Inside a cache block of S tokens, memory is laid out per kernel block of s tokens
// (s divides S), one after another, each holding its K part then its V part:
//   kernel block k (= b * S/s + j) starts at element k * kpage, kpage = s*H*(D + Dv)
//     NHD: K[k][t][h][d] at k*kpage +              t*H*D  + h*D  + d
//          V[k][t][h][d] at k*kpage + s*H*D +      t*H*Dv + h*Dv + d
//     HND: K[k][h][t][d] at k*kpage +              h*s*D  + t*D  + d
//          V[k][h][t][d] at k*kpage + s*H*D +      h*s*Dv + t*Dv + d
//     MLA: K[k][t][0][d] at k*kpage + t*L + d (L = latent width, kpage = s*L), V empty
// (H = num_kv_heads, D = head_size, Dv = head_size_v, strides in elements of the cache
// dtype.) Viewing a cache block as S/s kernel blocks therefore needs no copy: the
// key/value views have num_blocks * S/s blocks of s tokens with block stride kpage, and a
// slot (block * block_size + offset) is the same number in cache and kernel units.
//
// Memory comes from a KvMemoryAllocator, so device memory plugs in by implementing one
// (e.g. with cudaMalloc + cudaMemset) and passing it; views carry its Device.

#include <cstddef>
#include <memory>
#include <vector>

#include "attnkit/backend/backend.h"
#include "attnkit/export.h"
#include "attnkit/kv_cache/kv_cache_config.h"

namespace attnkit {

class ATTNKIT_API KvMemoryAllocator {
 public:
  virtual ~KvMemoryAllocator() = default;
  // Where the memory lives; stamped on every view.
  virtual Device device() const = 0;
  // `bytes` bytes, at least 256-byte aligned, zero-filled (the null block reads as zeros).
  // Throws Error(kOutOfMemory) naming the size when it cannot.
  virtual void* allocate(size_t bytes) = 0;
  virtual void deallocate(void* ptr, size_t bytes) noexcept = 0;
};

// Host memory, zero-filled: 256-byte aligned, and a buffer of 2 MiB or more in transparent
// huge pages (allocate_streamed_host_memory, core/host_memory.h; ATTNKIT_HUGE_PAGES).
class ATTNKIT_API HostKvMemoryAllocator final : public KvMemoryAllocator {
 public:
  Device device() const override { return Device{}; }
  void* allocate(size_t bytes) override;
  void deallocate(void* ptr, size_t bytes) noexcept override;
};

// The view of one layer's cache inside a buffer starting at `base` (layout above).
// num_blocks counts cache blocks; the returned views count kernel blocks.
ATTNKIT_API KvCacheTensors make_layer_cache_view(void* base, const KvCacheSpec& spec,
                                                 KvLayout layout, int kernel_block_size,
                                                 int num_blocks, Device device);

// The view of one state layer's blocks (kind mamba) inside a buffer starting at `base`,
// block b at byte b * page_bytes:
//   key   = conv state      [num_blocks, channels, conv_kernel - 1] in the conv dtype
//           (empty without convolution)
//   value = recurrent state [num_blocks, recurrent_shape()...] float32, at byte
//           recurrent_offset() of the block (empty without recurrent state)
// block_size is 1 (one block per request). page_bytes must be a multiple of both dtypes'
// sizes.
ATTNKIT_API KvCacheTensors make_state_cache_view(void* base, const KvCacheSpec& spec,
                                                 size_t page_bytes, int num_blocks, Device device);

// Owns the cache buffers (move-only; frees them through the allocator).
class ATTNKIT_API KvCacheStorage {
 public:
  // num_blocks includes the null block. Error(kInvalidArgument) for num_blocks < 2.
  KvCacheStorage(
      const KvCacheConfig& config, int num_blocks,
      std::shared_ptr<KvMemoryAllocator> allocator = std::make_shared<HostKvMemoryAllocator>());
  ~KvCacheStorage();
  KvCacheStorage(KvCacheStorage&&) noexcept;
  KvCacheStorage& operator=(KvCacheStorage&&) noexcept;
  KvCacheStorage(const KvCacheStorage&) = delete;
  KvCacheStorage& operator=(const KvCacheStorage&) = delete;

  int num_blocks() const { return num_blocks_; }
  // Total bytes held: num_buffers * num_blocks * page_size_bytes.
  size_t total_bytes() const;
  // The views of `layer_index`'s cache; both empty for a layer without cache.
  // Error(kNotFound) for a layer the config does not hold.
  const KvCacheTensors& tensors(int layer_index) const;
  // Base pointer of buffer j (for tests and device copies).
  void* buffer(int j) const { return buffers_.at(static_cast<size_t>(j)); }

 private:
  void release() noexcept;

  std::shared_ptr<KvMemoryAllocator> allocator_;
  int num_blocks_ = 0;
  size_t buffer_bytes_ = 0;
  std::vector<void*> buffers_;
  std::vector<int> layer_indices_;  // parallel to layer_tensors_
  std::vector<KvCacheTensors> layer_tensors_;
};

}  // namespace attnkit
