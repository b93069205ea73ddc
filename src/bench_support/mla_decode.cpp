#include "attnkit/bench/mla_decode.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "attnkit/kernels/mla_geometry.h"

namespace attnkit::bench {

AttentionLayerParams mla_decode_layer(const MlaDecodeShape& shape) {
  const bool fp8 = shape.kv_cache_dtype == KvCacheDType::kFp8E4M3;
  AttentionLayerParams layer;
  layer.kind = KvCacheKind::kMlaAttention;
  layer.num_heads = shape.heads;
  layer.num_kv_heads = 1;
  layer.head_size = kMlaLatentDim;
  layer.head_size_v = kMlaValueDim;
  layer.use_mla = true;
  layer.mla_rope_dim = kMlaLatentDim - kMlaValueDim;
  layer.scale = 1.0f / std::sqrt(192.0f);  // DeepSeek's qk_nope (128) + rope (64) head size
  layer.dtype = DType::kBFloat16;
  layer.kv_cache_dtype = shape.kv_cache_dtype;
  layer.k_scale = layer.v_scale = fp8 ? 0.5f : 1.0f;
  return layer;
}

KvCacheSpec mla_decode_cache_spec(const MlaDecodeShape& shape) {
  KvCacheSpec spec;
  spec.kind = KvCacheKind::kMlaAttention;
  spec.block_size = shape.block_size;
  spec.num_kv_heads = 1;
  spec.head_size = kMlaLatentDim;
  return spec;
}

MlaDecodePlans plan_mla_decode(const AttentionBackend& backend, const MlaDecodeShape& shape,
                               int sets, std::mt19937& rng) {
  const AttentionLayerParams layer = mla_decode_layer(shape);
  const KvCacheSpec spec = mla_decode_cache_spec(shape);
  const int pages = shape.blocks_per_request();
  MlaDecodePlans out;
  out.impl = backend.make_impl(layer);
  for (int set = 0; set < sets; ++set) {
    out.commons.push_back(std::make_unique<CommonAttentionMetadata>());
    CommonAttentionMetadata& c = *out.commons.back();
    c.num_reqs = shape.batch;
    c.num_actual_tokens = shape.batch;
    c.block_size = shape.block_size;
    c.max_blocks_per_req = pages;
    c.max_query_len = 1;
    c.max_seq_len = shape.context;
    std::vector<int32_t> ids(static_cast<size_t>(shape.batch) * pages);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(set * ids.size() + i);
    std::shuffle(ids.begin(), ids.end(), rng);
    c.block_table = ids;
    c.query_start_loc.push_back(0);
    const int pos = shape.context - 1;  // the new token's position
    for (int b = 0; b < shape.batch; ++b) {
      c.query_start_loc.push_back(c.query_start_loc.back() + 1);
      c.seq_lens.push_back(shape.context);
      const int32_t block = ids[static_cast<size_t>(b) * pages + pos / shape.block_size];
      c.slot_mapping.push_back(int64_t{block} * shape.block_size + pos % shape.block_size);
    }
    out.builders.push_back(backend.make_builder(spec, layer));
    out.plans.push_back(&out.builders.back()->build(c));
  }
  return out;
}

}  // namespace attnkit::bench
