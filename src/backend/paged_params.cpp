#include "attnkit/backend/paged_params.h"

namespace attnkit {
namespace {

int64_t head_stride_of(const TensorView& t) { return t.ndim == 3 ? t.stride(1) : 0; }

// Strides of one paged cache tensor in the contract's terms.
struct CacheStrides {
  int64_t block = 0, token = 0, head = 0;
};

CacheStrides strides_of(const TensorView& t, KvLayout layout) {
  return layout == KvLayout::kNHD ? CacheStrides{t.stride(0), t.stride(1), t.stride(2)}
                                  : CacheStrides{t.stride(0), t.stride(2), t.stride(1)};
}

}  // namespace

PagedAttentionParams layer_params_for(const AttentionLayerParams& layer) {
  const bool paged = uses_paged_cache(layer);
  const bool fp8 = paged && is_fp8(layer.kv_cache_dtype);
  PagedAttentionParams p;
  p.q_dtype = scalar_type_of(layer.dtype);
  p.num_heads = layer.num_heads;
  p.num_kv_heads = layer.num_kv_heads;
  p.head_size = layer.head_size;
  p.head_size_v = layer.head_size_v;
  p.scale = layer.scale;
  p.causal = layer.is_causal();
  p.sliding_window = layer.sliding_window;
  p.chunk_size = layer.chunk_size;
  p.soft_cap = layer.soft_cap;
  p.sinks = layer.sinks.empty() ? nullptr : layer.sinks.data();
  // Contiguous mode reads the fresh rows, in the compute dtype.
  p.kv_dtype = paged ? scalar_type_of(layer.kv_cache_dtype, layer.dtype) : p.q_dtype;
  p.k_scale = fp8 ? layer.k_scale : 1.0f;
  p.v_scale = fp8 ? (layer.use_mla ? layer.k_scale : layer.v_scale) : 1.0f;
  return p;
}

CacheUpdateParams layer_cache_update_params_for(const AttentionLayerParams& layer) {
  const bool fp8 = is_fp8(layer.kv_cache_dtype);
  CacheUpdateParams u;
  u.src_dtype = scalar_type_of(layer.dtype);
  u.kv_dtype = scalar_type_of(layer.kv_cache_dtype, layer.dtype);
  u.k_scale = fp8 ? layer.k_scale : 1.0f;
  u.v_scale = fp8 ? layer.v_scale : 1.0f;
  u.num_kv_heads = layer.num_kv_heads;
  u.head_size = layer.head_size;
  u.head_size_v = layer.use_mla ? 0 : layer.head_size_v;
  return u;
}

PagedAttentionParams paged_params_for(const ForwardArgs& a) {
  const AttentionLayerParams& layer = a.layer;
  const CommonAttentionMetadata& c = a.common;
  PagedAttentionParams p = layer_params_for(layer);
  p.q = a.query.data;
  p.out = a.output.data;
  p.q_token_stride = a.query.stride(0);
  p.q_head_stride = a.query.stride(1);
  p.o_token_stride = a.output.stride(0);
  p.o_head_stride = a.output.stride(1);
  p.num_seqs = c.num_reqs;
  p.query_start_loc = c.query_start_loc.data();
  p.seq_lens = c.seq_lens.data();
  p.causal = p.causal && c.causal;

  if (!uses_paged_cache(layer)) {
    // Contiguous mode over this step's rows: request i's keys start at its first query row.
    p.k_cache = a.key.data;
    p.v_cache = a.value.data;
    p.k_token_stride = a.key.stride(0);
    p.k_head_stride = head_stride_of(a.key);
    p.v_token_stride = a.value.stride(0);
    p.v_head_stride = head_stride_of(a.value);
    p.kv_start_loc = c.query_start_loc.data();
    return p;
  }
  const CacheStrides ks = strides_of(a.cache.key, a.cache.layout);
  p.k_cache = a.cache.key.data;
  p.k_block_stride = ks.block;
  p.k_token_stride = ks.token;
  p.k_head_stride = ks.head;
  if (layer.use_mla) {
    p.v_cache = a.cache.key.data;
    p.v_block_stride = ks.block;
    p.v_token_stride = ks.token;
    p.v_head_stride = ks.head;
  } else {
    const CacheStrides vs = strides_of(a.cache.value, a.cache.layout);
    p.v_cache = a.cache.value.data;
    p.v_block_stride = vs.block;
    p.v_token_stride = vs.token;
    p.v_head_stride = vs.head;
  }
  // A batch whose requests need no block (empty, or all of length 0) has an empty table;
  // the kernels still need a non-null pointer to know they run paged: a one-entry table
  // holding the null block (the metadata's own field, alive as long as its table).
  p.block_table = c.block_table.empty() ? &c.null_block_id : c.block_table.data();
  p.block_table_stride = c.max_blocks_per_req;
  // The cache's geometry, as for the cache update below (check_forward() has made sure the
  // metadata's block table is expressed in the same unit).
  p.block_size = a.cache.block_size;
  return p;
}

CacheUpdateParams cache_update_params_for(const ForwardArgs& a) {
  const AttentionLayerParams& layer = a.layer;
  const CacheStrides ks = strides_of(a.cache.key, a.cache.layout);
  CacheUpdateParams u = layer_cache_update_params_for(layer);
  u.key = a.key.data;
  u.key_token_stride = a.key.stride(0);
  u.key_head_stride = head_stride_of(a.key);
  u.k_cache = a.cache.key.data;
  u.k_block_stride = ks.block;
  u.k_token_stride = ks.token;
  u.k_head_stride = ks.head;
  if (!layer.use_mla) {
    const CacheStrides vs = strides_of(a.cache.value, a.cache.layout);
    u.value = a.value.data;
    u.value_token_stride = a.value.stride(0);
    u.value_head_stride = head_stride_of(a.value);
    u.v_cache = a.cache.value.data;
    u.v_block_stride = vs.block;
    u.v_token_stride = vs.token;
    u.v_head_stride = vs.head;
  }
  u.slot_mapping = a.common.slot_mapping.data();
  u.num_tokens = static_cast<int>(a.common.slot_mapping.size());
  u.block_size = a.cache.block_size;
  return u;
}

}  // namespace attnkit
