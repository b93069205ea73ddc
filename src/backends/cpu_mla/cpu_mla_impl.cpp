#include "backends/cpu_mla/cpu_mla_impl.h"

#include <fmt/format.h>

#include <span>
#include <string>

#include "attnkit/core/error.h"
#include "backends/cpu/flash_attention.h"
#include "backends/reference/reference_impl.h"

namespace attnkit::cpu_mla {
namespace {

template <typename... Args>
void require(bool ok, ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  if (!ok) throw Error(code, "CPU_MLA: " + fmt::format(format, std::forward<Args>(args)...));
}

// Checks a CPU tensor of `dtype`, [rows, heads, dim] (or [rows, dim] when allow_2d), with a
// stride-1 last dimension.
void check_rows(const TensorView& t, const char* what, ScalarType dtype, int heads, int dim,
                bool allow_2d = false) {
  constexpr ErrorCode kBad = ErrorCode::kInvalidArgument;
  require(t.device.type == DeviceType::kCpu, kBad, "{} must be in host memory ({})", what,
          t.describe());
  require(t.dtype == dtype, kBad, "{} has dtype {}, expected {}", what, to_string(t.dtype),
          to_string(dtype));
  const bool two_d = allow_2d && t.ndim == 2;
  require((t.ndim == 3 && t.size(1) == heads && t.size(2) == dim) || (two_d && t.size(1) == dim),
          kBad, "{} must be [tokens, {}, {}], got {}", what, heads, dim, t.describe());
  require(t.stride(t.ndim - 1) == 1, kBad, "{} must be contiguous in its last dimension ({})", what,
          t.describe());
}

}  // namespace

CpuMlaBuilder::CpuMlaBuilder(const AttentionLayerParams& layer) : layer_(layer) {}

const AttentionMetadata& CpuMlaBuilder::build(const CommonAttentionMetadata& common) {
  validate_common_metadata(common);
  for (int i = 0; i < common.num_reqs; ++i) {
    const auto s = static_cast<size_t>(i);
    const int q_len = common.query_start_loc[s + 1] - common.query_start_loc[s];
    require(q_len <= common.seq_lens[s], ErrorCode::kInvalidArgument,
            "request {} has {} new tokens but seq_len {} (queries are the last tokens of the "
            "sequence)",
            i, q_len, common.seq_lens[s]);
  }
  metadata_.common_ = &common;
  metadata_.plan_ = make_mla_plan(std::span<const int32_t>(common.query_start_loc),
                                  std::span<const int32_t>(common.seq_lens), layer_.num_heads,
                                  layer_.is_causal() && common.causal, layer_.sliding_window);
  return metadata_;
}

CpuMlaImpl::CpuMlaImpl(const AttentionLayerParams& layer)
    : layer_(layer),
      dtype_(scalar_type_of(layer.dtype)),
      kv_dtype_(scalar_type_of(layer.kv_cache_dtype, layer.dtype)) {
  constexpr ErrorCode kNo = ErrorCode::kUnsupported;
  require(layer.use_mla, kNo, "serves MLA layers only (layer {} is not MLA)", layer.layer_index);
  require(layer.attn_type == AttentionType::kDecoder, kNo,
          "attention type {} not supported (supported: decoder)", to_string(layer.attn_type));
  require(layer.num_kv_heads == 1, kNo, "num_kv_heads {} not supported (MLA: 1)",
          layer.num_kv_heads);
  require(layer.num_heads > 0, kNo, "num_heads {} must be positive", layer.num_heads);
  require(layer.head_size == kKvLoraRank + kRopeDim && layer.head_size_v == kKvLoraRank, kNo,
          "head_size {} / head_size_v {} not supported (supported: 576 / 512)", layer.head_size,
          layer.head_size_v);
  require(layer.sinks.empty() && layer.soft_cap == 0.0f && layer.chunk_size == 0, kNo,
          "sinks, soft-capping and chunked-local attention are not supported");
  require(layer.sliding_window >= 0, ErrorCode::kInvalidArgument, "sliding_window {} is negative",
          layer.sliding_window);
}

void CpuMlaImpl::forward(const TensorView& query, const TensorView& key,
                         const TensorView& /*value*/, const KvCacheTensors& cache,
                         const AttentionMetadata& metadata, const TensorView& output) {
  constexpr ErrorCode kBad = ErrorCode::kInvalidArgument;
  const auto* meta = dynamic_cast<const CpuMlaMetadata*>(&metadata);
  require(meta != nullptr, kBad, "metadata was not built by a CPU_MLA builder");
  const CommonAttentionMetadata& common = meta->common();
  const int tokens = common.num_actual_tokens;
  const int D = layer_.head_size, DV = layer_.head_size_v;
  check_rows(query, "query", dtype_, layer_.num_heads, D);
  check_rows(output, "output", dtype_, layer_.num_heads, DV);
  require(query.size(0) >= tokens && output.size(0) >= tokens, kBad,
          "query ({}) and output ({}) need at least num_actual_tokens = {} rows", query.size(0),
          output.size(0), tokens);
  require(!key.empty(), kBad, "key (this step's latent vectors) is required");
  check_rows(key, "key", dtype_, 1, D, /*allow_2d=*/true);

  // The latent cache: [num_blocks, block_size, 1, 576] (HND is the same with one head).
  const TensorView& c = cache.key;
  require(c.device.type == DeviceType::kCpu, kBad, "latent cache must be in host memory ({})",
          c.describe());
  require(c.dtype == kv_dtype_, kBad, "latent cache has dtype {}, expected {}", to_string(c.dtype),
          to_string(kv_dtype_));
  require(cache.block_size == common.block_size, kBad,
          "cache block size {} differs from the metadata's block size {}", cache.block_size,
          common.block_size);
  require(c.ndim == 4 && c.size(1) * c.size(2) == cache.block_size && c.size(3) == D &&
              c.stride(3) == 1,
          kBad,
          "latent cache must be [num_blocks, {}, 1, {}] with a stride-1 last dimension, got {}",
          cache.block_size, D, c.describe());
  const bool hnd = cache.layout == KvLayout::kHND;
  const int64_t block_stride = c.stride(0);
  const int64_t token_stride = hnd ? c.stride(2) : c.stride(1);
  const int64_t num_blocks = c.size(0);
  const float k_scale = is_fp8(layer_.kv_cache_dtype) ? layer_.k_scale : 1.0f;

  const int64_t capacity = num_blocks * cache.block_size;
  const auto num_slots = static_cast<int64_t>(common.slot_mapping.size());
  require(key.size(0) >= num_slots, kBad, "key has {} rows but the slot mapping has {} entries",
          key.size(0), num_slots);
  for (int64_t t = 0; t < num_slots; ++t) {
    const int64_t slot = common.slot_mapping[static_cast<size_t>(t)];
    require(slot < capacity, kBad, "slot_mapping[{}] = {} is outside the cache ({} blocks of {})",
            t, slot, num_blocks, cache.block_size);
  }
  for (int i = 0; i < common.num_reqs; ++i) {
    const int needed =
        (common.seq_lens[static_cast<size_t>(i)] + common.block_size - 1) / common.block_size;
    require(needed <= common.max_blocks_per_req, kBad,
            "request {} needs {} blocks for {} tokens but max_blocks_per_req is {}", i, needed,
            common.seq_lens[static_cast<size_t>(i)], common.max_blocks_per_req);
    for (int b = 0; b < needed; ++b) {
      const int32_t block =
          common.block_table[static_cast<size_t>(i) * common.max_blocks_per_req + b];
      require(block >= 0 && block < num_blocks, kBad,
              "block_table[{}][{}] = {} is outside the cache (0..{})", i, b, block, num_blocks - 1);
    }
  }

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
  u.slot_mapping = common.slot_mapping.data();
  u.num_tokens = static_cast<int>(num_slots);
  u.num_kv_heads = 1;
  u.head_size = D;
  u.head_size_v = 0;  // MLA: no separate values
  u.block_size = cache.block_size;
  cpu::cache_update(u);

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
  p.v_scale = k_scale;
  p.k_block_stride = p.v_block_stride = block_stride;
  p.k_token_stride = p.v_token_stride = token_stride;
  p.num_seqs = common.num_reqs;
  p.query_start_loc = common.query_start_loc.data();
  p.seq_lens = common.seq_lens.data();
  p.block_table = common.block_table.data();
  p.block_table_stride = common.max_blocks_per_req;
  p.block_size = common.block_size;
  p.num_heads = layer_.num_heads;
  p.num_kv_heads = 1;
  p.head_size = D;
  p.head_size_v = DV;
  p.scale = layer_.scale;
  p.causal = layer_.is_causal() && common.causal;
  p.sliding_window = layer_.sliding_window;
  mla_attention(p, meta->plan(), meta->workspace());
}

}  // namespace attnkit::cpu_mla
