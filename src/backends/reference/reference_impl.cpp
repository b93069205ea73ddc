// The REFERENCE plan (the common metadata, validated) and implementation: forward()
// checks every input against the layer, writes this step's K/V into the cache through the
// slot mapping, then runs the reference attention kernel.

#include "backends/reference/reference_impl.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

#include "attnkit/core/error.h"
#include "backends/reference/reference_kernels.h"

namespace attnkit {
namespace {

template <typename... Args>
void require(bool ok, fmt::format_string<Args...> format, Args&&... args) {
  if (!ok) {
    throw Error(ErrorCode::kInvalidArgument,
                "REFERENCE: " + fmt::format(format, std::forward<Args>(args)...));
  }
}

class ReferencePlan final : public AttentionMetadata {
 public:
  const CommonAttentionMetadata& common() const override { return *common_; }
  void reset(const CommonAttentionMetadata& common) { common_ = &common; }

 private:
  const CommonAttentionMetadata* common_ = nullptr;
};

class ReferenceBuilder final : public MetadataBuilder {
 public:
  const AttentionMetadata& build(const CommonAttentionMetadata& common) override {
    validate_common_metadata(common);
    plan_.reset(common);
    return plan_;
  }

 private:
  ReferencePlan plan_;
};

// Checks a [rows, heads, dim] view (or [rows, dim] when heads == 1 and allow_2d) whose
// last dimension is contiguous.
void check_rows(const TensorView& t, const char* what, ScalarType dtype, int heads, int dim,
                bool allow_2d = false) {
  require(t.device.type == DeviceType::kCpu, "{} must be in host memory ({})", what, t.describe());
  require(t.dtype == dtype, "{} has dtype {}, expected {}", what, to_string(t.dtype),
          to_string(dtype));
  const bool two_d = allow_2d && t.ndim == 2;
  require(t.ndim == 3 || two_d, "{} must be [tokens, {}, {}], got {}", what, heads, dim,
          t.describe());
  if (!two_d) {
    require(t.size(1) == heads && t.size(2) == dim, "{} must be [tokens, {}, {}], got {}", what,
            heads, dim, t.describe());
  } else {
    require(t.size(1) == dim, "{} must be [tokens, {}], got {}", what, dim, t.describe());
  }
  require(t.stride(t.ndim - 1) == 1, "{} must be contiguous in its last dimension ({})", what,
          t.describe());
}

int64_t head_stride_of(const TensorView& t) { return t.ndim == 3 ? t.stride(1) : 0; }

// Strides of one paged cache tensor in the kernel contract's terms.
struct CacheStrides {
  int64_t block = 0, token = 0, head = 0;
};

CacheStrides check_cache(const TensorView& t, const char* what, const KvCacheTensors& cache,
                         ScalarType dtype, int heads, int dim) {
  require(t.device.type == DeviceType::kCpu, "{} must be in host memory ({})", what, t.describe());
  require(t.dtype == dtype, "{} has dtype {}, expected {}", what, to_string(t.dtype),
          to_string(dtype));
  const bool nhd = cache.layout == KvLayout::kNHD;
  const int64_t want_1 = nhd ? cache.block_size : heads;
  const int64_t want_2 = nhd ? heads : cache.block_size;
  require(t.ndim == 4 && t.size(1) == want_1 && t.size(2) == want_2 && t.size(3) == dim,
          "{} must be {} [num_blocks, {}, {}, {}], got {}", what, to_string(cache.layout), want_1,
          want_2, dim, t.describe());
  require(t.stride(3) == 1, "{} must be contiguous in its last dimension ({})", what, t.describe());
  return nhd ? CacheStrides{t.stride(0), t.stride(1), t.stride(2)}
             : CacheStrides{t.stride(0), t.stride(2), t.stride(1)};
}

class ReferenceImpl final : public AttentionImpl {
 public:
  explicit ReferenceImpl(const AttentionLayerParams& layer) : layer_(layer) {}
  std::string_view backend_name() const override { return "REFERENCE"; }

  void forward(const TensorView& query, const TensorView& key, const TensorView& value,
               const KvCacheTensors& cache, const AttentionMetadata& metadata,
               const TensorView& output) override;

 private:
  bool uses_cache() const {
    return layer_.attn_type == AttentionType::kDecoder ||
           layer_.attn_type == AttentionType::kEncoderDecoder;
  }
  void update_cache(const TensorView& key, const TensorView& value, const KvCacheTensors& cache,
                    const CommonAttentionMetadata& common) const;
  void check_block_table(const CommonAttentionMetadata& common, int64_t num_blocks) const;

  AttentionLayerParams layer_;
};

void ReferenceImpl::update_cache(const TensorView& key, const TensorView& value,
                                 const KvCacheTensors& cache,
                                 const CommonAttentionMetadata& common) const {
  const ScalarType src = scalar_type_of(layer_.dtype);
  const ScalarType kv = scalar_type_of(layer_.kv_cache_dtype, layer_.dtype);
  const bool fp8 = is_fp8(layer_.kv_cache_dtype);
  const int64_t num_tokens = static_cast<int64_t>(common.slot_mapping.size());
  require(key.size(0) >= num_tokens, "key has {} rows but the slot mapping has {} entries",
          key.size(0), num_tokens);
  const CacheStrides ks =
      check_cache(cache.key, "key cache", cache, kv, layer_.num_kv_heads, layer_.head_size);
  const int64_t capacity = cache.key.size(0) * cache.block_size;
  for (int64_t t = 0; t < num_tokens; ++t) {
    const int64_t slot = common.slot_mapping[static_cast<size_t>(t)];
    require(slot < capacity, "slot_mapping[{}] = {} is outside the cache ({} blocks of {})", t,
            slot, cache.key.size(0), cache.block_size);
  }

  CacheUpdateParams p;
  p.key = key.data;
  p.src_dtype = src;
  p.key_token_stride = key.stride(0);
  p.key_head_stride = head_stride_of(key);
  p.k_cache = cache.key.data;
  p.kv_dtype = kv;
  p.k_scale = fp8 ? layer_.k_scale : 1.0f;
  p.v_scale = fp8 ? layer_.v_scale : 1.0f;
  p.k_block_stride = ks.block;
  p.k_token_stride = ks.token;
  p.k_head_stride = ks.head;
  if (!layer_.use_mla) {
    require(!value.empty() && value.size(0) >= num_tokens, "value must have {} rows ({})",
            num_tokens, value.describe());
    const CacheStrides vs =
        check_cache(cache.value, "value cache", cache, kv, layer_.num_kv_heads, layer_.head_size_v);
    require(cache.value.size(0) == cache.key.size(0),
            "key and value caches differ in blocks ({} vs {})", cache.key.size(0),
            cache.value.size(0));
    p.value = value.data;
    p.value_token_stride = value.stride(0);
    p.value_head_stride = head_stride_of(value);
    p.v_cache = cache.value.data;
    p.v_block_stride = vs.block;
    p.v_token_stride = vs.token;
    p.v_head_stride = vs.head;
  }
  p.slot_mapping = common.slot_mapping.data();
  p.num_tokens = static_cast<int>(num_tokens);
  p.num_kv_heads = layer_.num_kv_heads;
  p.head_size = layer_.head_size;
  p.head_size_v = layer_.head_size_v;
  p.block_size = cache.block_size;
  reference_cache_update(p);
}

void ReferenceImpl::check_block_table(const CommonAttentionMetadata& common,
                                      int64_t num_blocks) const {
  for (int i = 0; i < common.num_reqs; ++i) {
    const int needed =
        (common.seq_lens[static_cast<size_t>(i)] + common.block_size - 1) / common.block_size;
    require(needed <= common.max_blocks_per_req,
            "request {} needs {} blocks for {} tokens but max_blocks_per_req is {}", i, needed,
            common.seq_lens[static_cast<size_t>(i)], common.max_blocks_per_req);
    for (int b = 0; b < needed; ++b) {
      const int32_t block =
          common.block_table[static_cast<size_t>(i) * common.max_blocks_per_req + b];
      require(block >= 0 && block < num_blocks,
              "block_table[{}][{}] = {} is outside the cache (0..{})", i, b, block, num_blocks - 1);
    }
  }
}

void ReferenceImpl::forward(const TensorView& query, const TensorView& key, const TensorView& value,
                            const KvCacheTensors& cache, const AttentionMetadata& metadata,
                            const TensorView& output) {
  const CommonAttentionMetadata& common = metadata.common();
  const ScalarType dtype = scalar_type_of(layer_.dtype);
  const int tokens = common.num_actual_tokens;
  check_rows(query, "query", dtype, layer_.num_heads, layer_.head_size);
  check_rows(output, "output", dtype, layer_.num_heads, layer_.head_size_v);
  require(query.size(0) >= tokens && output.size(0) >= tokens,
          "query ({}) and output ({}) need at least num_actual_tokens = {} rows", query.size(0),
          output.size(0), tokens);
  const bool has_key = !key.empty();
  if (has_key) {
    check_rows(key, "key", dtype, layer_.num_kv_heads, layer_.head_size, layer_.use_mla);
    if (!layer_.use_mla) {
      check_rows(value, "value", dtype, layer_.num_kv_heads, layer_.head_size_v);
    }
  }

  PagedAttentionParams p;
  p.q = query.data;
  p.out = output.data;
  p.q_dtype = dtype;
  p.q_token_stride = query.stride(0);
  p.q_head_stride = query.stride(1);
  p.o_token_stride = output.stride(0);
  p.o_head_stride = output.stride(1);
  p.num_seqs = common.num_reqs;
  p.query_start_loc = common.query_start_loc.data();
  p.seq_lens = common.seq_lens.data();
  p.num_heads = layer_.num_heads;
  p.num_kv_heads = layer_.num_kv_heads;
  p.head_size = layer_.head_size;
  p.head_size_v = layer_.head_size_v;
  p.scale = layer_.scale;
  p.causal = layer_.is_causal() && common.causal;
  p.sliding_window = layer_.sliding_window;
  p.chunk_size = layer_.chunk_size;
  p.soft_cap = layer_.soft_cap;
  p.sinks = layer_.sinks.empty() ? nullptr : layer_.sinks.data();

  if (uses_cache()) {
    const bool fp8 = is_fp8(layer_.kv_cache_dtype);
    require(cache.block_size == common.block_size,
            "cache block size {} differs from the metadata's block size {}", cache.block_size,
            common.block_size);
    if (has_key) {
      update_cache(key, value, cache, common);
    } else {
      require(layer_.attn_type == AttentionType::kEncoderDecoder,
              "key/value are required for {} layers (only cross attention may reuse a filled "
              "cache)",
              to_string(layer_.attn_type));
    }
    const ScalarType kv = scalar_type_of(layer_.kv_cache_dtype, layer_.dtype);
    const CacheStrides ks =
        check_cache(cache.key, "key cache", cache, kv, layer_.num_kv_heads, layer_.head_size);
    check_block_table(common, cache.key.size(0));
    p.k_cache = cache.key.data;
    p.kv_dtype = kv;
    p.k_scale = fp8 ? layer_.k_scale : 1.0f;
    p.v_scale = fp8 ? layer_.v_scale : 1.0f;
    p.k_block_stride = ks.block;
    p.k_token_stride = ks.token;
    p.k_head_stride = ks.head;
    if (layer_.use_mla) {
      // V is the first head_size_v elements of the latent vector (so it shares k_scale).
      p.v_cache = cache.key.data;
      p.v_scale = p.k_scale;
      p.v_block_stride = ks.block;
      p.v_token_stride = ks.token;
      p.v_head_stride = ks.head;
    } else {
      const CacheStrides vs = check_cache(cache.value, "value cache", cache, kv,
                                          layer_.num_kv_heads, layer_.head_size_v);
      p.v_cache = cache.value.data;
      p.v_block_stride = vs.block;
      p.v_token_stride = vs.token;
      p.v_head_stride = vs.head;
    }
    p.block_table = common.block_table.data();
    p.block_table_stride = common.max_blocks_per_req;
    p.block_size = common.block_size;
  } else {
    // Encoder / encoder-only: no cache; each request attends over its own fresh rows.
    require(has_key, "{} attention needs this step's key and value", to_string(layer_.attn_type));
    require(!layer_.use_mla, "MLA layers cannot be {} attention", to_string(layer_.attn_type));
    for (int i = 0; i < common.num_reqs; ++i) {
      const auto s = static_cast<size_t>(i);
      const int q_len = common.query_start_loc[s + 1] - common.query_start_loc[s];
      require(common.seq_lens[s] == q_len,
              "{} attention: request {} has seq_len {} but {} new tokens (must be equal)",
              to_string(layer_.attn_type), i, common.seq_lens[s], q_len);
    }
    require(key.size(0) >= tokens, "key has {} rows, need {}", key.size(0), tokens);
    p.k_cache = key.data;
    p.v_cache = value.data;
    p.kv_dtype = dtype;
    p.k_token_stride = key.stride(0);
    p.k_head_stride = head_stride_of(key);
    p.v_token_stride = value.stride(0);
    p.v_head_stride = head_stride_of(value);
    p.kv_start_loc = common.query_start_loc.data();
    p.causal = false;
  }
  if (p.causal) {
    for (int i = 0; i < common.num_reqs; ++i) {
      const auto s = static_cast<size_t>(i);
      const int q_len = common.query_start_loc[s + 1] - common.query_start_loc[s];
      require(q_len <= common.seq_lens[s],
              "request {} has {} new tokens but seq_len {} (causal queries are the last "
              "tokens of the sequence)",
              i, q_len, common.seq_lens[s]);
    }
  }
  reference_paged_attention(p);
}

}  // namespace

void validate_common_metadata(const CommonAttentionMetadata& c) {
  const auto reqs = static_cast<size_t>(c.num_reqs);
  require(c.num_reqs >= 0, "num_reqs {} is negative", c.num_reqs);
  require(c.query_start_loc.size() == reqs + 1,
          "query_start_loc has {} entries, expected num_reqs + 1 = {}", c.query_start_loc.size(),
          reqs + 1);
  require(c.seq_lens.size() == reqs, "seq_lens has {} entries, expected num_reqs = {}",
          c.seq_lens.size(), reqs);
  require(c.query_start_loc[0] == 0, "query_start_loc[0] is {}, must be 0", c.query_start_loc[0]);
  for (size_t i = 0; i < reqs; ++i) {
    require(c.query_start_loc[i + 1] >= c.query_start_loc[i],
            "query_start_loc must be non-decreasing (entry {} is {} after {})", i + 1,
            c.query_start_loc[i + 1], c.query_start_loc[i]);
    require(c.seq_lens[i] >= 0, "seq_lens[{}] = {} is negative", i, c.seq_lens[i]);
  }
  require(c.query_start_loc[reqs] == c.num_actual_tokens,
          "query_start_loc ends at {} but num_actual_tokens is {}", c.query_start_loc[reqs],
          c.num_actual_tokens);
  require(c.block_table.size() == reqs * static_cast<size_t>(c.max_blocks_per_req),
          "block_table has {} entries, expected num_reqs * max_blocks_per_req = {}",
          c.block_table.size(), reqs * static_cast<size_t>(std::max(c.max_blocks_per_req, 0)));
  require(c.block_table.empty() || c.block_size > 0, "block_size {} must be positive",
          c.block_size);
}

std::unique_ptr<MetadataBuilder> make_reference_builder() {
  return std::make_unique<ReferenceBuilder>();
}

std::unique_ptr<AttentionImpl> make_reference_impl(const AttentionLayerParams& layer) {
  require(layer.num_heads > 0 && layer.num_kv_heads > 0,
          "num_heads ({}) and num_kv_heads ({}) must be positive", layer.num_heads,
          layer.num_kv_heads);
  require(layer.num_heads % layer.num_kv_heads == 0,
          "num_heads {} is not a multiple of num_kv_heads {}", layer.num_heads, layer.num_kv_heads);
  require(layer.head_size > 0 && layer.head_size_v > 0,
          "head_size ({}) and head_size_v ({}) must be positive", layer.head_size,
          layer.head_size_v);
  require(layer.sliding_window >= 0, "sliding_window {} is negative", layer.sliding_window);
  require(layer.chunk_size >= 0, "chunk_size {} is negative", layer.chunk_size);
  require(layer.soft_cap >= 0.0f, "soft_cap {} is negative", layer.soft_cap);
  require(layer.sinks.empty() || layer.sinks.size() == static_cast<size_t>(layer.num_heads),
          "sinks has {} entries, expected num_heads = {}", layer.sinks.size(), layer.num_heads);
  if (layer.use_mla) {
    require(layer.num_kv_heads == 1, "MLA layers have num_kv_heads 1, got {}", layer.num_kv_heads);
    require(layer.head_size_v <= layer.head_size,
            "MLA head_size_v {} (kv_lora_rank) exceeds the latent width {}", layer.head_size_v,
            layer.head_size);
  }
  return std::make_unique<ReferenceImpl>(layer);
}

}  // namespace attnkit
