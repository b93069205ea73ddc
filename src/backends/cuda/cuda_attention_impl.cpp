#include "backends/cuda/cuda_attention_impl.h"

#include <cstdint>
#include <string>
#include <vector>

#include "attnkit/build_config.h"
#include "attnkit/core/error.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda/device_buffer.h"

namespace attnkit::cuda {
namespace {

std::string_view family_name(KernelFamily family) {
  return family == KernelFamily::kFlash ? "CUDA_FLASH" : "CUDA_PAGED";
}

#if ATTNKIT_HAS_CUDA

// The kernels read 8 elements (16 bytes for 16-bit types) at a time along the head
// dimension, so every row must start on such a boundary.
void check_view(std::string_view family, std::string_view what, const TensorView& t, int ndim,
                ScalarType dtype) {
  auto fail = [&](const std::string& why) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string(family) + ": " + std::string(what) + " " + t.describe() + ": " + why);
  };
  if (t.device.type != DeviceType::kCuda) fail("must be on a CUDA device");
  if (t.ndim != ndim) fail("expected " + std::to_string(ndim) + " dimensions");
  if (t.dtype != dtype) fail("expected dtype " + std::string(to_string(dtype)));
  if (t.stride(ndim - 1) != 1) fail("the last (head) dimension must have stride 1");
  for (int d = 0; d < ndim - 1; ++d) {
    if (t.stride(d) % 8 != 0) fail("strides must be multiples of 8 elements");
  }
  if (reinterpret_cast<uintptr_t>(t.data) % 16 != 0) fail("data must be 16-byte aligned");
}

class CudaAttentionImpl final : public AttentionImpl {
 public:
  CudaAttentionImpl(KernelFamily family, const AttentionLayerParams& layer)
      : family_(family), layer_(layer) {
    if (!layer.sinks.empty()) {
      if (static_cast<int>(layer.sinks.size()) != layer.num_heads) {
        throw Error(ErrorCode::kInvalidArgument,
                    std::string(family_name(family)) + ": " + std::to_string(layer.sinks.size()) +
                        " sink logits for " + std::to_string(layer.num_heads) + " heads");
      }
      sinks_.reserve(layer.sinks.size() * sizeof(float));
      sinks_.upload(layer.sinks.data(), layer.sinks.size() * sizeof(float));
    }
  }

  std::string_view backend_name() const override { return family_name(family_); }

  void forward(const TensorView& query, const TensorView& key, const TensorView& value,
               const KvCacheTensors& cache, const AttentionMetadata& metadata,
               const TensorView& output) override;

 private:
  KernelFamily family_;
  AttentionLayerParams layer_;
  DeviceBuffer sinks_;
};

void CudaAttentionImpl::forward(const TensorView& query, const TensorView& key,
                                const TensorView& value, const KvCacheTensors& cache,
                                const AttentionMetadata& metadata, const TensorView& output) {
  const std::string_view name = family_name(family_);
  const auto* meta = dynamic_cast<const CudaMetadata*>(&metadata);
  if (meta == nullptr) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string(name) + ": metadata was not built by a CUDA backend's builder");
  }
  const CommonAttentionMetadata& common = meta->common();
  const ScalarType compute = scalar_type_of(layer_.dtype);
  check_view(name, "query", query, 3, compute);
  check_view(name, "output", output, 3, compute);
  const int64_t tokens = common.num_actual_tokens;
  if (query.size(0) < tokens || query.size(1) != layer_.num_heads ||
      query.size(2) != layer_.head_size || output.size(0) < tokens ||
      output.size(1) != layer_.num_heads || output.size(2) != layer_.head_size_v) {
    throw Error(ErrorCode::kInvalidArgument,
                std::string(name) + ": query " + query.describe() + " / output " +
                    output.describe() + " do not match " + std::to_string(tokens) + " tokens x " +
                    std::to_string(layer_.num_heads) + " heads x head_size " +
                    std::to_string(layer_.head_size));
  }
  const bool fresh_kv = !key.empty();
  if (fresh_kv) {
    check_view(name, "key", key, 3, compute);
    check_view(name, "value", value, 3, compute);
    // Fresh K/V rows: one per slot_mapping entry with a cache (cross attention: encoder
    // tokens), else one per query token (encoder-only).
    const int64_t rows =
        cache.key.empty() ? tokens : static_cast<int64_t>(common.slot_mapping.size());
    if (key.size(0) < rows || value.size(0) < rows || key.size(1) != layer_.num_kv_heads ||
        key.size(2) != layer_.head_size || value.size(1) != layer_.num_kv_heads ||
        value.size(2) != layer_.head_size_v) {
      throw Error(ErrorCode::kInvalidArgument,
                  std::string(name) + ": key " + key.describe() + " / value " + value.describe() +
                      " do not match " + std::to_string(layer_.num_kv_heads) + " KV heads");
    }
  }

  PagedAttentionParams p;
  p.q = query.data;
  p.out = output.data;
  p.q_dtype = compute;
  p.q_token_stride = query.stride(0);
  p.q_head_stride = query.stride(1);
  p.o_token_stride = output.stride(0);
  p.o_head_stride = output.stride(1);
  p.num_seqs = common.num_reqs;
  p.query_start_loc = meta->query_start_loc;
  p.seq_lens = meta->seq_lens;
  p.num_heads = layer_.num_heads;
  p.num_kv_heads = layer_.num_kv_heads;
  p.head_size = layer_.head_size;
  p.head_size_v = layer_.head_size_v;
  p.scale = layer_.scale;
  p.causal = meta->causal;
  p.sliding_window = layer_.sliding_window;
  p.chunk_size = layer_.chunk_size;
  p.soft_cap = layer_.soft_cap;
  p.sinks = layer_.sinks.empty() ? nullptr : static_cast<const float*>(sinks_.data());

  if (cache.key.empty()) {
    // No cache (encoder-only): attend over this step's K/V, contiguous per request.
    if (!fresh_kv) {
      throw Error(ErrorCode::kInvalidArgument,
                  std::string(name) + ": no KV cache and no fresh key/value to attend over");
    }
    p.k_cache = key.data;
    p.v_cache = value.data;
    p.kv_dtype = compute;
    p.k_token_stride = key.stride(0);
    p.k_head_stride = key.stride(1);
    p.v_token_stride = value.stride(0);
    p.v_head_stride = value.stride(1);
    p.kv_start_loc = meta->query_start_loc;
  } else {
    check_view(name, "key cache", cache.key, 4, cache.key.dtype);
    check_view(name, "value cache", cache.value, 4, cache.key.dtype);
    const bool nhd = cache.layout == KvLayout::kNHD;
    const int token_dim = nhd ? 1 : 2, head_dim = nhd ? 2 : 1;
    if (cache.key.size(token_dim) != cache.block_size ||
        cache.value.size(token_dim) != cache.block_size) {
      throw Error(ErrorCode::kInvalidArgument,
                  std::string(name) + ": cache block dimension " + cache.key.describe() +
                      " differs from the kernel block size " + std::to_string(cache.block_size));
    }
    if (cache.block_size != common.block_size) {
      throw Error(ErrorCode::kInvalidArgument, std::string(name) + ": metadata block_size " +
                                                   std::to_string(common.block_size) +
                                                   " differs from the cache's kernel block size " +
                                                   std::to_string(cache.block_size));
    }
    // Indices the kernels follow blindly: check them here, on the host copies.
    const int64_t num_blocks = cache.key.size(0);
    for (const int32_t b : common.block_table) {
      if (b < 0 || b >= num_blocks) {
        throw Error(ErrorCode::kInvalidArgument, std::string(name) + ": block_table entry " +
                                                     std::to_string(b) + " outside the cache's " +
                                                     std::to_string(num_blocks) + " blocks");
      }
    }
    for (const int64_t slot : common.slot_mapping) {
      if (slot >= num_blocks * cache.block_size) {
        throw Error(ErrorCode::kInvalidArgument,
                    std::string(name) + ": slot_mapping entry " + std::to_string(slot) +
                        " outside the cache's " + std::to_string(num_blocks * cache.block_size) +
                        " slots");
      }
    }
    p.k_cache = cache.key.data;
    p.v_cache = cache.value.data;
    p.kv_dtype = cache.key.dtype;
    p.k_scale = layer_.k_scale;
    p.v_scale = layer_.v_scale;
    p.k_block_stride = cache.key.stride(0);
    p.k_token_stride = cache.key.stride(token_dim);
    p.k_head_stride = cache.key.stride(head_dim);
    p.v_block_stride = cache.value.stride(0);
    p.v_token_stride = cache.value.stride(token_dim);
    p.v_head_stride = cache.value.stride(head_dim);
    p.block_table = meta->block_table;
    p.block_table_stride = common.max_blocks_per_req;
    p.block_size = cache.block_size;

    if (fresh_kv && meta->slot_mapping != nullptr) {
      CacheUpdateParams u;
      u.key = key.data;
      u.value = value.data;
      u.src_dtype = compute;
      u.key_token_stride = key.stride(0);
      u.key_head_stride = key.stride(1);
      u.value_token_stride = value.stride(0);
      u.value_head_stride = value.stride(1);
      u.k_cache = cache.key.data;
      u.v_cache = cache.value.data;
      u.kv_dtype = cache.key.dtype;
      u.k_scale = layer_.k_scale;
      u.v_scale = layer_.v_scale;
      u.k_block_stride = p.k_block_stride;
      u.k_token_stride = p.k_token_stride;
      u.k_head_stride = p.k_head_stride;
      u.v_block_stride = p.v_block_stride;
      u.v_token_stride = p.v_token_stride;
      u.v_head_stride = p.v_head_stride;
      u.slot_mapping = meta->slot_mapping;
      u.num_tokens = static_cast<int>(common.slot_mapping.size());
      u.num_kv_heads = layer_.num_kv_heads;
      u.head_size = layer_.head_size;
      u.head_size_v = layer_.head_size_v;
      u.block_size = cache.block_size;
      launch_cache_update(u);
    }
  }

  if (family_ == KernelFamily::kFlash) {
    launch_flash_attention(p, meta->device);
  } else {
    launch_paged_attention(p, meta->device);
  }
}

#endif  // ATTNKIT_HAS_CUDA

}  // namespace

std::unique_ptr<AttentionImpl> make_cuda_attention_impl(KernelFamily family,
                                                        const AttentionLayerParams& layer) {
#if ATTNKIT_HAS_CUDA
  return std::make_unique<CudaAttentionImpl>(family, layer);
#else
  (void)layer;
  throw Error(ErrorCode::kUnsupported, std::string(family_name(family)) +
                                           " is not built into this binary (built without CUDA)");
#endif
}

}  // namespace attnkit::cuda
