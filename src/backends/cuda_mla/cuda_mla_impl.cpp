#include "backends/cuda_mla/cuda_mla_impl.h"

#include <fmt/format.h>

#include <cstdint>
#include <string>

#include "attnkit/backend/forward_check.h"
#include "attnkit/backend/paged_params.h"
#include "attnkit/build_config.h"
#include "attnkit/core/error.h"
#include "backends/cuda_mla/cuda_mla_metadata.h"
#include "backends/cuda_mla/mla_geometry.h"
#include "backends/cuda_mla/mla_kernels.h"
#include "kernels/cuda/device_plan.h"

namespace attnkit::cuda_mla {
namespace {

template <typename... Args>
void require(bool ok, ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  if (!ok) throw Error(code, "CUDA_MLA: " + fmt::format(format, std::forward<Args>(args)...));
}

// Layers CUDA_MLA's kernels cannot run (the capabilities never select it for them).
void check_layer(const AttentionLayerParams& layer) {
  check_layer_params(layer, "CUDA_MLA");
  constexpr ErrorCode kNo = ErrorCode::kUnsupported;
  require(layer.use_mla, kNo, "serves MLA layers only (layer {} is not MLA)", layer.layer_index);
  require(layer.attn_type == AttentionType::kDecoder, kNo,
          "attention type {} not supported (supported: decoder)", to_string(layer.attn_type));
  require(layer.num_kv_heads == 1, kNo, "num_kv_heads {} not supported (MLA: 1)",
          layer.num_kv_heads);
  require(layer.num_heads > 0, kNo, "num_heads {} must be positive", layer.num_heads);
  require(layer.head_size == kMlaLatentDim && layer.head_size_v == kMlaValueDim, kNo,
          "head_size {} / head_size_v {} not supported (supported: 576 / 512)", layer.head_size,
          layer.head_size_v);
  require(layer.mla_rope_dim == 0 || layer.mla_rope_dim == kMlaRopeDim, kNo,
          "MLA rope dim {} not supported (supported: 64)", layer.mla_rope_dim);
  require(layer.dtype == DType::kFloat16 || layer.dtype == DType::kBFloat16, kNo,
          "dtype {} not supported (supported: float16, bfloat16)", to_string(layer.dtype));
  const ScalarType kv = scalar_type_of(layer.kv_cache_dtype, layer.dtype);
  require(kv == scalar_type_of(layer.dtype) || kv == ScalarType::kFp8E4M3, kNo,
          "kv_cache_dtype {} not supported with dtype {} (supported: auto, the compute dtype, "
          "fp8_e4m3)",
          to_string(layer.kv_cache_dtype), to_string(layer.dtype));
  require(layer.sinks.empty() && layer.soft_cap == 0.0f && layer.chunk_size == 0, kNo,
          "sinks, soft-capping and chunked-local attention are not supported");
  require(layer.sliding_window >= 0, ErrorCode::kInvalidArgument, "sliding_window {} is negative",
          layer.sliding_window);
}

#if ATTNKIT_HAS_CUDA

class CudaMlaImpl final : public AttentionImpl {
 public:
  explicit CudaMlaImpl(const AttentionLayerParams& layer) : layer_(layer) {
    // Every kernel this layer's forwards may launch, loaded now (DevicePlan::load_only).
    cuda::DevicePlan load;
    load.load_only = true;
    cuda::launch_cache_update(layer_cache_update_params_for(layer_), nullptr);
    launch_mla_attention(layer_params_for(layer_), load);
  }

  std::string_view backend_name() const override { return "CUDA_MLA"; }

  void forward(const TensorView& query, const TensorView& key, const TensorView& value,
               const KvCacheTensors& cache, const AttentionMetadata& metadata,
               const TensorView& output, const ExecutionContext& ctx) override;

 private:
  AttentionLayerParams layer_;
};

// The kernels move 16 bytes at a time along a latent row (8 16-bit values, or 16 fp8
// values of a raw fp8 tile) and read only the block ids below each request's length.
constexpr ForwardCheckOptions kChecks{.backend = "CUDA_MLA",
                                      .device = DeviceType::kCuda,
                                      .vector_elements = 8,
                                      .whole_block_table = false};

void CudaMlaImpl::forward(const TensorView& query, const TensorView& key, const TensorView& value,
                          const KvCacheTensors& cache, const AttentionMetadata& metadata,
                          const TensorView& output, const ExecutionContext& ctx) {
  const auto* meta = dynamic_cast<const CudaMlaMetadata*>(&metadata);
  require(meta != nullptr, ErrorCode::kInvalidArgument,
          "metadata was not built by a CUDA_MLA builder");
  const ForwardArgs args{layer_, query, key, value, cache, meta->common(), output};
  check_forward(args, kChecks);
  if (is_fp8(layer_.kv_cache_dtype)) {
    // One fp8 value per byte: 16-byte copies need strides of 16 values.
    for (int d = 0; d + 1 < cache.key.ndim; ++d) {
      if (cache.key.stride(d) % 16 == 0) continue;  // describe() only for the message
      require(false, ErrorCode::kInvalidArgument,
              "fp8 latent cache strides must be multiples of 16 elements ({})",
              cache.key.describe());
    }
  }

  // The shared mapping, with the device copies of the metadata.
  const cuda::UploadedStep& step = meta->step;
  PagedAttentionParams p = paged_params_for(args);
  p.query_start_loc = step.query_start_loc;
  p.seq_lens = step.seq_lens;
  p.block_table = step.block_table;
  p.causal = meta->causal;
  cuda::DevicePlan device = step.device;
  device.stream = ctx.stream;
  if (writes_cache(args)) {
    CacheUpdateParams u = cache_update_params_for(args);
    u.slot_mapping = step.slot_mapping;
    cuda::launch_cache_update(u, ctx.stream);
  }
  launch_mla_attention(p, device);
  check_forward_outputs(args, kChecks);
}

#endif  // ATTNKIT_HAS_CUDA

}  // namespace

std::unique_ptr<AttentionImpl> make_cuda_mla_impl(const AttentionLayerParams& layer) {
  check_layer(layer);
#if ATTNKIT_HAS_CUDA
  return std::make_unique<CudaMlaImpl>(layer);
#else
  throw Error(ErrorCode::kUnsupported,
              "CUDA_MLA is not built into this binary (built without CUDA)");
#endif
}

}  // namespace attnkit::cuda_mla
