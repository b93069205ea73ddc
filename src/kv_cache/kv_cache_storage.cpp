#include "attnkit/kv_cache/kv_cache_storage.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "attnkit/core/host_memory.h"

namespace attnkit {

void* HostKvMemoryAllocator::allocate(size_t bytes) {
  // Huge pages for a cache of 2 MiB or more (core/host_memory.h): zeroing it here faults
  // them in.
  constexpr size_t kAlign = 256;
  void* p = nullptr;
  try {
    p = allocate_streamed_host_memory(bytes, kAlign);
  } catch (const Error&) {
    throw Error(ErrorCode::kOutOfMemory,
                fmt::format("cannot allocate {} bytes of host memory for the KV cache", bytes));
  }
  std::memset(p, 0, std::max<size_t>(bytes, 1));
  return p;
}

void HostKvMemoryAllocator::deallocate(void* ptr, size_t /*bytes*/) noexcept { std::free(ptr); }

KvCacheTensors make_layer_cache_view(void* base, const KvCacheSpec& spec, KvLayout layout,
                                     int kernel_block_size, int num_blocks, Device device) {
  KvCacheTensors out;
  out.layout = layout;
  if (!spec.has_cache()) return out;
  ATTNKIT_CHECK(kernel_block_size > 0 && spec.block_size % kernel_block_size == 0,
                "kernel block size must divide the cache block size");
  const int64_t s = kernel_block_size;
  const int64_t h = spec.num_kv_heads;
  const int64_t d = spec.head_size;
  const int64_t dv = spec.head_size_v;
  const int64_t kpage = s * h * (d + dv);  // elements per kernel block
  const int64_t kernel_blocks = static_cast<int64_t>(num_blocks) * (spec.block_size / s);
  out.block_size = kernel_block_size;

  auto make = [&](void* data, int64_t head) {
    TensorView v;
    v.data = data;
    v.dtype = spec.dtype;
    v.device = device;
    v.ndim = 4;
    if (layout == KvLayout::kNHD) {
      v.shape = {kernel_blocks, s, h, head};
      v.strides = {kpage, h * head, head, 1};
    } else {
      v.shape = {kernel_blocks, h, s, head};
      v.strides = {kpage, s * head, head, 1};
    }
    return v;
  };
  out.key = make(base, d);
  if (dv > 0) {
    auto* v_base =
        static_cast<unsigned char*>(base) + static_cast<size_t>(s * h * d) * size_of(spec.dtype);
    out.value = make(v_base, dv);
  }
  return out;
}

KvCacheTensors make_state_cache_view(void* base, const KvCacheSpec& spec, size_t page_bytes,
                                     int num_blocks, Device device) {
  ATTNKIT_CHECK(spec.state.has_value(), "a state cache view needs a state spec");
  const StateLayerDims& s = *spec.state;
  ATTNKIT_CHECK(page_bytes >= s.bytes(), "a state page must hold the whole state");
  KvCacheTensors out;
  out.block_size = 1;
  auto make = [&](void* data, ScalarType dtype, const std::vector<int>& shape) {
    ATTNKIT_CHECK(page_bytes % size_of(dtype) == 0, "state page not a multiple of its dtype");
    TensorView v;
    v.data = data;
    v.dtype = dtype;
    v.device = device;
    v.ndim = static_cast<int>(shape.size()) + 1;
    v.shape[0] = num_blocks;
    v.strides[0] = static_cast<int64_t>(page_bytes / size_of(dtype));
    int64_t stride = 1;
    for (size_t i = shape.size(); i-- > 0;) {
      v.shape[i + 1] = shape[i];
      v.strides[i + 1] = stride;
      stride *= shape[i];
    }
    return v;
  };
  if (s.conv_elems() > 0) out.key = make(base, s.conv_dtype, s.conv_shape());
  if (s.recurrent_elems() > 0) {
    out.value = make(static_cast<unsigned char*>(base) + s.recurrent_offset(), s.recurrent_dtype,
                     s.recurrent_shape());
  }
  return out;
}

KvCacheStorage::KvCacheStorage(const KvCacheConfig& config, int num_blocks,
                               std::shared_ptr<KvMemoryAllocator> allocator)
    : allocator_(std::move(allocator)), num_blocks_(num_blocks) {
  if (num_blocks < 2) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("KV cache needs at least 2 blocks (block 0 is the null block), got {}",
                            num_blocks));
  }
  ATTNKIT_CHECK(allocator_ != nullptr, "KV cache storage needs an allocator");
  buffer_bytes_ = config.page_size_bytes * static_cast<size_t>(num_blocks);
  try {
    for (int j = 0; j < config.num_buffers; ++j)
      buffers_.push_back(allocator_->allocate(buffer_bytes_));
  } catch (...) {
    release();
    throw;
  }
  const Device device = allocator_->device();
  for (const KvCacheGroup& g : config.groups) {
    for (size_t j = 0; j < g.layer_indices.size(); ++j) {
      layer_indices_.push_back(g.layer_indices[j]);
      if (!g.has_cache()) {
        layer_tensors_.push_back(KvCacheTensors{{}, {}, g.layer_layouts[j], 0});
        continue;
      }
      if (g.spec.is_state()) {
        layer_tensors_.push_back(
            make_state_cache_view(buffers_[j], g.spec, config.page_size_bytes, num_blocks, device));
        continue;
      }
      layer_tensors_.push_back(make_layer_cache_view(buffers_[j], g.spec, g.layer_layouts[j],
                                                     g.kernel_block_size, num_blocks, device));
    }
  }
}

KvCacheStorage::~KvCacheStorage() { release(); }

KvCacheStorage::KvCacheStorage(KvCacheStorage&& other) noexcept
    : allocator_(std::move(other.allocator_)),
      num_blocks_(other.num_blocks_),
      buffer_bytes_(other.buffer_bytes_),
      buffers_(std::exchange(other.buffers_, {})),
      layer_indices_(std::move(other.layer_indices_)),
      layer_tensors_(std::move(other.layer_tensors_)) {}

KvCacheStorage& KvCacheStorage::operator=(KvCacheStorage&& other) noexcept {
  if (this != &other) {
    release();
    allocator_ = std::move(other.allocator_);
    num_blocks_ = other.num_blocks_;
    buffer_bytes_ = other.buffer_bytes_;
    buffers_ = std::exchange(other.buffers_, {});
    layer_indices_ = std::move(other.layer_indices_);
    layer_tensors_ = std::move(other.layer_tensors_);
  }
  return *this;
}

void KvCacheStorage::release() noexcept {
  for (void* p : buffers_) allocator_->deallocate(p, buffer_bytes_);
  buffers_.clear();
}

size_t KvCacheStorage::total_bytes() const { return buffers_.size() * buffer_bytes_; }

const KvCacheTensors& KvCacheStorage::tensors(int layer_index) const {
  for (size_t i = 0; i < layer_indices_.size(); ++i) {
    if (layer_indices_[i] == layer_index) return layer_tensors_[i];
  }
  throw Error(ErrorCode::kNotFound,
              fmt::format("layer {} has no KV cache in this storage", layer_index));
}

}  // namespace attnkit
