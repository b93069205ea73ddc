#include "backends/cuda_mla/cuda_mla_impl.h"

#include <fmt/format.h>

#include <cstdint>
#include <string>

#include "attnkit/build_config.h"
#include "attnkit/core/error.h"
#include "backends/cuda/cuda_kernels.h"
#include "backends/cuda_mla/cuda_mla_metadata.h"
#include "backends/cuda_mla/mla_geometry.h"
#include "backends/cuda_mla/mla_kernels.h"

namespace attnkit::cuda_mla {
namespace {

template <typename... Args>
void require(bool ok, ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  if (!ok) throw Error(code, "CUDA_MLA: " + fmt::format(format, std::forward<Args>(args)...));
}

// Layers CUDA_MLA's kernels cannot run (the capabilities never select it for them).
void check_layer(const AttentionLayerParams& layer) {
  constexpr ErrorCode kNo = ErrorCode::kUnsupported;
  require(layer.use_mla, kNo, "serves MLA layers only (layer {} is not MLA)", layer.layer_index);
  require(layer.attn_type == AttentionType::kDecoder, kNo,
          "attention type {} not supported (supported: decoder)", to_string(layer.attn_type));
  require(layer.num_kv_heads == 1, kNo, "num_kv_heads {} not supported (MLA: 1)",
          layer.num_kv_heads);
  require(layer.num_heads > 0, kNo, "num_heads {} must be positive", layer.num_heads);
  require(layer.head_size == kLatentDim && layer.head_size_v == kValueDim, kNo,
          "head_size {} / head_size_v {} not supported (supported: 576 / 512)", layer.head_size,
          layer.head_size_v);
  require(layer.mla_rope_dim == 0 || layer.mla_rope_dim == kRopeDim, kNo,
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

// A CUDA tensor of `dtype` with a stride-1 last dimension, 16-byte aligned rows: the
// kernels move 16 bytes (8 elements; 8 fp8 values are 8 bytes) at a time.
void check_device_view(const TensorView& t, const char* what, ScalarType dtype) {
  constexpr ErrorCode kBad = ErrorCode::kInvalidArgument;
  require(t.device.type == DeviceType::kCuda, kBad, "{} must be on a CUDA device ({})", what,
          t.describe());
  require(t.dtype == dtype, kBad, "{} has dtype {}, expected {}", what, to_string(t.dtype),
          to_string(dtype));
  require(t.ndim >= 1 && t.stride(t.ndim - 1) == 1, kBad,
          "{} must be contiguous in its last dimension ({})", what, t.describe());
  for (int d = 0; d + 1 < t.ndim; ++d) {
    require(t.stride(d) % 8 == 0, kBad, "{} strides must be multiples of 8 elements ({})", what,
            t.describe());
  }
  require(reinterpret_cast<uintptr_t>(t.data) % 16 == 0, kBad, "{} data must be 16-byte aligned",
          what);
}

class CudaMlaImpl final : public AttentionImpl {
 public:
  explicit CudaMlaImpl(const AttentionLayerParams& layer)
      : layer_(layer),
        dtype_(scalar_type_of(layer.dtype)),
        kv_dtype_(scalar_type_of(layer.kv_cache_dtype, layer.dtype)) {}

  std::string_view backend_name() const override { return "CUDA_MLA"; }

  void forward(const TensorView& query, const TensorView& key, const TensorView& value,
               const KvCacheTensors& cache, const AttentionMetadata& metadata,
               const TensorView& output) override;

 private:
  AttentionLayerParams layer_;
  ScalarType dtype_;
  ScalarType kv_dtype_;
};

void CudaMlaImpl::forward(const TensorView& query, const TensorView& key,
                          const TensorView& /*value*/, const KvCacheTensors& cache,
                          const AttentionMetadata& metadata, const TensorView& output) {
  constexpr ErrorCode kBad = ErrorCode::kInvalidArgument;
  const auto* meta = dynamic_cast<const CudaMlaMetadata*>(&metadata);
  require(meta != nullptr, kBad, "metadata was not built by a CUDA_MLA builder");
  const CommonAttentionMetadata& common = meta->common();
  const int tokens = common.num_actual_tokens;
  const int H = layer_.num_heads;

  check_device_view(query, "query", dtype_);
  check_device_view(output, "output", dtype_);
  require(query.ndim == 3 && query.size(1) == H && query.size(2) == kLatentDim, kBad,
          "query must be [tokens, {}, {}], got {}", H, kLatentDim, query.describe());
  require(output.ndim == 3 && output.size(1) == H && output.size(2) == kValueDim, kBad,
          "output must be [tokens, {}, {}], got {}", H, kValueDim, output.describe());
  require(query.size(0) >= tokens && output.size(0) >= tokens, kBad,
          "query ({}) and output ({}) need at least num_actual_tokens = {} rows", query.size(0),
          output.size(0), tokens);

  // The latent cache: [num_blocks, block_size, 1, 576] (HND is the same with one head).
  const TensorView& c = cache.key;
  require(!c.empty(), kBad, "the latent cache is required");
  check_device_view(c, "latent cache", kv_dtype_);
  require(cache.block_size == common.block_size, kBad,
          "cache block size {} differs from the metadata's block size {}", cache.block_size,
          common.block_size);
  require(c.ndim == 4 && c.size(1) * c.size(2) == cache.block_size && c.size(3) == kLatentDim, kBad,
          "latent cache must be [num_blocks, {}, 1, {}], got {}", cache.block_size, kLatentDim,
          c.describe());
  const bool hnd = cache.layout == KvLayout::kHND;
  const int64_t block_stride = c.stride(0);
  const int64_t token_stride = hnd ? c.stride(2) : c.stride(1);
  const int64_t num_blocks = c.size(0);

  // Indices the kernels follow blindly: check them here, on the host copies.
  for (int i = 0; i < common.num_reqs; ++i) {
    const int needed =
        (common.seq_lens[static_cast<size_t>(i)] + common.block_size - 1) / common.block_size;
    for (int b = 0; b < needed; ++b) {
      const int32_t block =
          common.block_table[static_cast<size_t>(i) * common.max_blocks_per_req + b];
      require(block >= 0 && block < num_blocks, kBad,
              "block_table[{}][{}] = {} is outside the cache (0..{})", i, b, block, num_blocks - 1);
    }
  }
  const auto num_slots = static_cast<int64_t>(common.slot_mapping.size());
  const int64_t capacity = num_blocks * cache.block_size;
  for (int64_t t = 0; t < num_slots; ++t) {
    const int64_t slot = common.slot_mapping[static_cast<size_t>(t)];
    require(slot < capacity, kBad, "slot_mapping[{}] = {} is outside the cache ({} blocks of {})",
            t, slot, num_blocks, cache.block_size);
  }

  const float k_scale = kv_dtype_ == ScalarType::kFp8E4M3 ? layer_.k_scale : 1.0f;
  if (num_slots > 0) {
    require(!key.empty(), kBad, "key (this step's latent vectors) is required");
    check_device_view(key, "key", dtype_);
    const bool shape_ok = (key.ndim == 3 && key.size(1) == 1 && key.size(2) == kLatentDim) ||
                          (key.ndim == 2 && key.size(1) == kLatentDim);
    require(shape_ok && key.size(0) >= num_slots, kBad,
            "key must be [>= {} rows, 1, {}] (or [rows, {}]), got {}", num_slots, kLatentDim,
            kLatentDim, key.describe());
    CacheUpdateParams u;
    u.key = key.data;
    u.src_dtype = dtype_;
    u.key_token_stride = key.stride(0);
    u.key_head_stride = key.ndim == 3 ? key.stride(1) : 0;
    u.k_cache = c.data;
    u.kv_dtype = kv_dtype_;
    u.k_scale = k_scale;
    u.k_block_stride = block_stride;
    u.k_token_stride = token_stride;
    u.slot_mapping = meta->slot_mapping;
    u.num_tokens = static_cast<int>(num_slots);
    u.num_kv_heads = 1;
    u.head_size = kLatentDim;
    u.head_size_v = 0;  // MLA: V is the latent prefix, written with K
    u.block_size = cache.block_size;
    cuda::launch_cache_update(u);
  }

  PagedAttentionParams p;
  p.q = query.data;
  p.out = output.data;
  p.q_dtype = dtype_;
  p.q_token_stride = query.stride(0);
  p.q_head_stride = query.stride(1);
  p.o_token_stride = output.stride(0);
  p.o_head_stride = output.stride(1);
  p.k_cache = c.data;
  p.v_cache = c.data;
  p.kv_dtype = kv_dtype_;
  p.k_scale = k_scale;
  p.v_scale = k_scale;  // one latent row, written with k_scale
  p.k_block_stride = p.v_block_stride = block_stride;
  p.k_token_stride = p.v_token_stride = token_stride;
  p.num_seqs = common.num_reqs;
  p.query_start_loc = meta->query_start_loc;
  p.seq_lens = meta->seq_lens;
  p.block_table = meta->block_table;
  p.block_table_stride = common.max_blocks_per_req;
  p.block_size = common.block_size;
  p.num_heads = H;
  p.num_kv_heads = 1;
  p.head_size = kLatentDim;
  p.head_size_v = kValueDim;
  p.scale = layer_.scale;
  p.causal = meta->causal;
  p.sliding_window = layer_.sliding_window;
  launch_mla_attention(p, meta->device);
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
