// Builds one case's inputs. The context each request already has (positions before this
// step's tokens) goes into the cache through the reference cache update, i.e. exactly as
// the kernel contract quantises it; unused slots and blocks hold large garbage, so a kernel
// that reads keys it should not see is caught.

#include "case_inputs.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "attnkit/core/numeric.h"
#include "backends/reference/reference_kernels.h"

namespace attnkit::conformance {
namespace {

constexpr float kQueryRange = 3.0f;     // q in [-3, 3], k in [-1, 1]: scores of order 1
constexpr float kGarbageRange = 20.0f;  // unused cache slots
constexpr int kSpareBlocks = 4;         // blocks no request owns

void fill_uniform(const HostTensor& t, float range, std::mt19937_64& gen) {
  std::uniform_real_distribution<float> dist(-range, range);
  for (int64_t i = 0; i < t.view().numel(); ++i) {
    store_from_float(t.data(), t.view().dtype, i, dist(gen));
  }
}

// Strides of a paged cache view in the contract's (block, token, head) terms.
struct Strides {
  int64_t block, token, head;
};
Strides cache_strides(const HostTensor& t, KvLayout layout) {
  const TensorView v = t.view();
  return layout == KvLayout::kNHD ? Strides{v.stride(0), v.stride(1), v.stride(2)}
                                  : Strides{v.stride(0), v.stride(2), v.stride(1)};
}

}  // namespace

TensorView view_at(const HostTensor& tensor, void* data, Device device) {
  TensorView v = tensor.view();
  v.data = data;
  v.device = device;
  return v;
}

CaseInputs build_case_inputs(const ConformanceCase& c) {
  const AttentionLayerParams& L = c.layer;
  const ScalarType dt = scalar_type_of(L.dtype);
  const ScalarType kvt = scalar_type_of(L.kv_cache_dtype, L.dtype);
  const bool fp8 = is_fp8(L.kv_cache_dtype);
  const int B = static_cast<int>(c.query_lens.size());
  const int H = L.num_heads, KVH = L.num_kv_heads, D = L.head_size, DV = L.head_size_v;
  const int bs = c.block_size;
  const bool cross = L.attn_type == AttentionType::kEncoderDecoder;
  std::mt19937_64 gen(c.seed);

  CaseInputs in;
  in.has_cache = L.attn_type == AttentionType::kDecoder || cross;
  CommonAttentionMetadata& m = in.common;
  m.num_reqs = B;
  m.query_start_loc.assign(1, 0);
  for (int q : c.query_lens) m.query_start_loc.push_back(m.query_start_loc.back() + q);
  const int T = m.query_start_loc.back();
  m.num_actual_tokens = T;
  m.seq_lens.assign(c.seq_lens.begin(), c.seq_lens.end());
  m.max_query_len = *std::max_element(c.query_lens.begin(), c.query_lens.end());
  m.max_seq_len = *std::max_element(c.seq_lens.begin(), c.seq_lens.end());
  m.causal = L.is_causal();
  m.block_size = bs;
  if (cross) m.encoder_seq_lens = m.seq_lens;

  in.query = HostTensor(dt, {T, H, D});
  fill_uniform(in.query, kQueryRange, gen);

  in.spec.kind = kind_of(c.selector_config());
  in.spec.block_size = bs;
  in.spec.num_kv_heads = KVH;
  in.spec.head_size = D;
  in.spec.head_size_v = L.use_mla ? 0 : DV;
  in.spec.dtype = kvt;
  in.spec.sliding_window = L.sliding_window;
  in.spec.chunk_size = L.chunk_size;
  if (cross) in.spec.max_encoder_len = m.max_seq_len;

  if (!in.has_cache) {
    // Encoder / encoder-only: this step's rows are the whole sequence; no cache, no slots.
    in.key = HostTensor(dt, {T, KVH, D});
    in.value = HostTensor(dt, {T, KVH, DV});
    fill_uniform(in.key, 1.0f, gen);
    fill_uniform(in.value, 1.0f, gen);
    m.slot_mapping.assign(static_cast<size_t>(T), -1);
    return in;
  }

  // Block table: every request's blocks, handed out in a random physical order.
  int total_blocks = kSpareBlocks;
  for (int r = 0; r < B; ++r) {
    const int blocks = (c.seq_lens[static_cast<size_t>(r)] + bs - 1) / bs;
    m.max_blocks_per_req = std::max(m.max_blocks_per_req, blocks);
    total_blocks += blocks;
  }
  m.max_blocks_per_req = std::max(m.max_blocks_per_req, 1);
  std::vector<int32_t> physical(static_cast<size_t>(total_blocks));
  std::iota(physical.begin(), physical.end(), 0);
  std::shuffle(physical.begin(), physical.end(), gen);
  m.null_block_id = 0;
  m.block_table.assign(static_cast<size_t>(B) * m.max_blocks_per_req, m.null_block_id);
  size_t next = 0;
  for (int r = 0; r < B; ++r) {
    for (int b = 0; b < (c.seq_lens[static_cast<size_t>(r)] + bs - 1) / bs; ++b) {
      m.block_table[static_cast<size_t>(r) * m.max_blocks_per_req + b] = physical[next++];
    }
  }
  auto slot_of = [&](int r, int pos) -> int64_t {
    const int32_t block = m.block_table[static_cast<size_t>(r) * m.max_blocks_per_req + pos / bs];
    return static_cast<int64_t>(block) * bs + pos % bs;
  };

  const bool nhd = c.layout == KvLayout::kNHD;
  auto cache_shape = [&](int dim) {
    return nhd ? std::vector<int64_t>{total_blocks, bs, KVH, dim}
               : std::vector<int64_t>{total_blocks, KVH, bs, dim};
  };
  in.key_cache = HostTensor(kvt, cache_shape(D));
  fill_uniform(in.key_cache, kGarbageRange, gen);
  if (!L.use_mla) {
    in.value_cache = HostTensor(kvt, cache_shape(DV));
    fill_uniform(in.value_cache, kGarbageRange, gen);
  }

  // Context rows (all positions for cross attention, the earlier ones otherwise), written
  // as an earlier step would have: fresh values in the compute dtype, quantised.
  std::vector<int64_t> context_slots;
  for (int r = 0; r < B; ++r) {
    const int n = c.seq_lens[static_cast<size_t>(r)];
    const int context = cross ? n : n - c.query_lens[static_cast<size_t>(r)];
    for (int p = 0; p < context; ++p) context_slots.push_back(slot_of(r, p));
  }
  const auto rows = static_cast<int64_t>(context_slots.size());
  HostTensor ctx_key(dt, {std::max<int64_t>(rows, 1), KVH, D});
  HostTensor ctx_value(dt, {std::max<int64_t>(rows, 1), KVH, DV});
  fill_uniform(ctx_key, 1.0f, gen);
  fill_uniform(ctx_value, 1.0f, gen);
  CacheUpdateParams up;
  up.key = ctx_key.data();
  up.value = L.use_mla ? nullptr : ctx_value.data();
  up.src_dtype = dt;
  up.key_token_stride = ctx_key.view().stride(0);
  up.key_head_stride = ctx_key.view().stride(1);
  up.value_token_stride = ctx_value.view().stride(0);
  up.value_head_stride = ctx_value.view().stride(1);
  up.k_cache = in.key_cache.data();
  up.v_cache = L.use_mla ? nullptr : in.value_cache.data();
  up.kv_dtype = kvt;
  up.k_scale = fp8 ? L.k_scale : 1.0f;
  up.v_scale = fp8 ? L.v_scale : 1.0f;
  const Strides ks = cache_strides(in.key_cache, c.layout);
  up.k_block_stride = ks.block;
  up.k_token_stride = ks.token;
  up.k_head_stride = ks.head;
  if (!L.use_mla) {
    const Strides vs = cache_strides(in.value_cache, c.layout);
    up.v_block_stride = vs.block;
    up.v_token_stride = vs.token;
    up.v_head_stride = vs.head;
  }
  up.slot_mapping = context_slots.data();
  up.num_tokens = static_cast<int>(rows);
  up.num_kv_heads = KVH;
  up.head_size = D;
  up.head_size_v = DV;
  up.block_size = bs;
  reference_cache_update(up);

  if (cross) {
    m.slot_mapping.assign(static_cast<size_t>(T), -1);  // the encoder's K/V are cached
    return in;
  }
  in.key = HostTensor(dt, {T, KVH, D});
  fill_uniform(in.key, 1.0f, gen);
  if (!L.use_mla) {
    in.value = HostTensor(dt, {T, KVH, DV});
    fill_uniform(in.value, 1.0f, gen);
  }
  for (int r = 0; r < B; ++r) {
    const int n = c.seq_lens[static_cast<size_t>(r)];
    const int q = c.query_lens[static_cast<size_t>(r)];
    for (int j = 0; j < q; ++j) m.slot_mapping.push_back(slot_of(r, n - q + j));
  }
  return in;
}

}  // namespace attnkit::conformance
