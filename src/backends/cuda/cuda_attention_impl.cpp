#include "backends/cuda/cuda_attention_impl.h"

#include <cstdint>
#include <string>
#include <vector>

#include "attnkit/backend/forward_check.h"
#include "attnkit/backend/paged_params.h"
#include "attnkit/build_config.h"
#include "attnkit/core/error.h"
#include "backends/cuda/cuda_kernels.h"
#include "kernels/cuda/device_buffer.h"

namespace attnkit::cuda {
namespace {

std::string_view family_name(KernelFamily family) {
  return family == KernelFamily::kFlash ? "CUDA_FLASH" : "CUDA_PAGED";
}

#if ATTNKIT_HAS_CUDA

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
  // The kernels read 8 elements (16 bytes for 16-bit types) at a time along the head
  // dimension, so every row must start on such a boundary; they read the block ids of a
  // whole KV tile before masking, so every block-table entry must exist.
  const ForwardCheckOptions checks{.backend = name,
                                   .device = DeviceType::kCuda,
                                   .vector_elements = 8,
                                   .whole_block_table = true};
  const ForwardArgs args{layer_, query, key, value, cache, meta->common(), output};
  check_forward(args, checks);

  // The shared mapping, with the device copies of the metadata and sinks.
  PagedAttentionParams p = paged_params_for(args);
  p.query_start_loc = meta->query_start_loc;
  p.seq_lens = meta->seq_lens;
  p.causal = meta->causal;
  p.sinks = layer_.sinks.empty() ? nullptr : static_cast<const float*>(sinks_.data());
  FlashLaunchOptions flash_options;
  if (uses_paged_cache(layer_)) {
    p.block_table = meta->block_table;
    if (writes_cache(args)) {
      CacheUpdateParams u = cache_update_params_for(args);
      u.slot_mapping = meta->slot_mapping;
      if (family_ == KernelFamily::kFlash && can_fold_cache_update(u, p, meta->device)) {
        flash_options.fresh_kv = u;  // the attention launch writes the cache itself
      } else {
        launch_cache_update(u);
      }
    }
  } else {
    p.kv_start_loc = meta->query_start_loc;
  }

  if (family_ == KernelFamily::kFlash) {
    launch_flash_attention(p, meta->device, flash_options);
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
