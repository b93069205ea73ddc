// CPU_FLASH through the backend protocol: capabilities and validate(), the builder's plan,
// and forward() (cache update + attention) against the dense oracle, on every SIMD target.

#include "backends/cpu_flash/cpu_flash_backend.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "attention_case.h"
#include "attnkit/core/error.h"
#include "attnkit/core/numeric.h"
#include "attnkit/kernels/cpu_isa.h"

namespace attnkit {
namespace {

using testing::AttentionCase;
using testing::CaseSpec;

DType dtype_of(ScalarType t) {
  switch (t) {
    case ScalarType::kFloat16:
      return DType::kFloat16;
    case ScalarType::kBFloat16:
      return DType::kBFloat16;
    default:
      return DType::kFloat32;
  }
}

KvCacheDType kv_dtype_of(ScalarType t) {
  switch (t) {
    case ScalarType::kFloat16:
      return KvCacheDType::kFloat16;
    case ScalarType::kBFloat16:
      return KvCacheDType::kBFloat16;
    case ScalarType::kFp8E4M3:
      return KvCacheDType::kFp8E4M3;
    case ScalarType::kFp8E5M2:
      return KvCacheDType::kFp8E5M2;
    default:
      return KvCacheDType::kFloat32;
  }
}

size_t bytes_of(ScalarType t) { return size_of(t); }

TensorView view3(void* data, ScalarType t, int64_t n0, int64_t n1, int64_t n2, int64_t s0) {
  TensorView v = TensorView::contiguous(data, t, {n0, n1, n2});
  v.strides[0] = s0;
  return v;
}

// One forward() step: the last q_len positions of every request are this step's tokens;
// their K/V come fresh and forward() writes them into the cache before attending.
// cross_fill: cross attention whose encoder K/V (every encoder position) arrives this step.
void run_step(const CaseSpec& spec, AttentionType type, uint64_t seed, bool cross_fill = false) {
  AttentionCase c(spec);
  c.clear_output();
  const int H = spec.num_heads, KV = spec.num_kv_heads, d = spec.head_size;
  const int dv = spec.head_size_v, bs = spec.block_size;
  const int T = c.num_tokens();
  const ScalarType dt = spec.q_dtype;
  const bool contiguous = spec.contiguous;
  const bool cross = type == AttentionType::kEncoderDecoder;

  AttentionLayerParams layer;
  layer.attn_type = type;
  layer.num_heads = H;
  layer.num_kv_heads = KV;
  layer.head_size = d;
  layer.head_size_v = dv;
  layer.scale = c.softmax_scale();
  layer.sliding_window = spec.sliding_window;
  layer.chunk_size = spec.chunk_size;
  layer.soft_cap = spec.soft_cap;
  layer.sinks = c.sinks();
  layer.dtype = dtype_of(dt);
  layer.kv_cache_dtype = kv_dtype_of(spec.kv_dtype);
  layer.k_scale = spec.k_scale;
  layer.v_scale = spec.v_scale;
  layer.use_mla = spec.mla;

  CommonAttentionMetadata common;
  common.num_reqs = static_cast<int>(spec.q_lens.size());
  common.num_actual_tokens = T;
  common.query_start_loc = c.query_start_loc();
  common.seq_lens = c.seq_lens();
  common.block_table = c.block_table();
  common.max_blocks_per_req = c.max_blocks();
  common.block_size = contiguous ? 0 : bs;
  common.causal = type == AttentionType::kDecoder;

  // Fresh K/V rows (or, for encoder self-attention, the case's contiguous K/V itself).
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<uint8_t> key_buf, value_buf;
  TensorView key, value;
  if (contiguous) {
    key = view3(c.k_bytes().data(), dt, T, KV, d, int64_t{KV} * d);
    value = view3(c.v_bytes().data(), dt, T, KV, dv, int64_t{KV} * dv);
  } else if (!cross || cross_fill) {
    // Decoder: the step's tokens (the last q_len positions); cross: every encoder position.
    int rows = 0;
    for (size_t s = 0; s < spec.q_lens.size(); ++s)
      rows += cross ? spec.kv_lens[s] : spec.q_lens[s];
    key_buf.resize(static_cast<size_t>(rows) * KV * d * bytes_of(dt));
    for (int64_t i = 0; i < int64_t{rows} * KV * d; ++i)
      store_from_float(key_buf.data(), dt, i, uni(rng));
    key = view3(key_buf.data(), dt, rows, KV, d, int64_t{KV} * d);
    if (!spec.mla) {
      value_buf.resize(static_cast<size_t>(rows) * KV * dv * bytes_of(dt));
      for (int64_t i = 0; i < int64_t{rows} * KV * dv; ++i)
        store_from_float(value_buf.data(), dt, i, uni(rng));
      value = view3(value_buf.data(), dt, rows, KV, dv, int64_t{KV} * dv);
    }
    for (size_t s = 0; s < spec.q_lens.size(); ++s) {
      const int first = cross ? 0 : spec.kv_lens[s] - spec.q_lens[s];
      for (int pos = first; pos < spec.kv_lens[s]; ++pos) {
        const int64_t blk = common.block_table[s * static_cast<size_t>(common.max_blocks_per_req) +
                                               static_cast<size_t>(pos / bs)];
        common.slot_mapping.push_back(blk * bs + pos % bs);
      }
    }
  }

  KvCacheTensors cache;
  const ScalarType kt = spec.kv_dtype;
  if (!contiguous) {
    cache.layout = spec.hnd ? KvLayout::kHND : KvLayout::kNHD;
    cache.block_size = bs;
    const int64_t nb = c.num_blocks();
    const int vw = spec.mla ? d : dv;
    auto shape = [&](int w) {
      return spec.hnd ? std::vector<int64_t>{nb, KV, bs, w} : std::vector<int64_t>{nb, bs, KV, w};
    };
    cache.key = TensorView::contiguous(c.k_bytes().data(), kt, shape(d));
    if (!spec.mla) cache.value = TensorView::contiguous(c.v_bytes().data(), kt, shape(vw));
  }
  const std::vector<uint8_t> k_before = c.k_bytes(),
                             v_before = spec.mla ? std::vector<uint8_t>{} : c.v_bytes();

  TensorView query = view3(c.q_bytes().data(), dt, T, H, d, c.q_token_stride());
  TensorView output = view3(c.out_bytes().data(), dt, T, H, dv, c.o_token_stride());

  auto backend = make_cpu_flash_backend();
  KvCacheSpec kv_spec;
  kv_spec.block_size = bs;
  kv_spec.num_kv_heads = KV;
  kv_spec.head_size = d;
  kv_spec.head_size_v = spec.mla ? 0 : dv;
  kv_spec.dtype = kt;
  auto builder = backend->make_builder(kv_spec, layer);
  const AttentionMetadata& meta = builder->build(common);
  auto impl = backend->make_impl(layer);
  EXPECT_EQ(impl->backend_name(), "CPU_FLASH");
  impl->forward(query, key, value, cache, meta, output);

  // The cache holds exactly quantize(fresh / scale) at the new slots and nothing else moved.
  if (!contiguous && !key.empty()) {
    std::vector<uint8_t> k_want = k_before, v_want = v_before;
    const int64_t kbs = cache.key.strides[0];
    const int64_t kts = spec.hnd ? cache.key.strides[2] : cache.key.strides[1];
    const int64_t khs = spec.hnd ? cache.key.strides[1] : cache.key.strides[2];
    for (int t = 0; t < static_cast<int>(common.slot_mapping.size()); ++t) {
      const int64_t slot = common.slot_mapping[static_cast<size_t>(t)];
      const int64_t base = slot / bs * kbs + slot % bs * kts;
      for (int h = 0; h < KV; ++h) {
        for (int x = 0; x < d; ++x) {
          const float f = load_as_float(key.data, dt, (int64_t{t} * KV + h) * d + x);
          store_from_float(k_want.data(), kt, base + h * khs + x, f / spec.k_scale);
        }
        if (!spec.mla) {
          for (int x = 0; x < dv; ++x) {
            const float f = load_as_float(value.data, dt, (int64_t{t} * KV + h) * dv + x);
            const int64_t vbase =
                slot / bs * cache.value.strides[0] +
                slot % bs * (spec.hnd ? cache.value.strides[2] : cache.value.strides[1]);
            store_from_float(
                v_want.data(), kt,
                vbase + h * (spec.hnd ? cache.value.strides[1] : cache.value.strides[2]) + x,
                f / spec.v_scale);
          }
        }
      }
    }
    EXPECT_TRUE(k_want == c.k_bytes()) << "key cache differs after the update: " << spec.describe();
    if (!spec.mla) {
      EXPECT_TRUE(v_want == c.v_bytes()) << "value cache differs: " << spec.describe();
    }
  }
  c.recompute_expected();
  std::string where;
  EXPECT_LE(c.worst_violation(&where), 0.0) << spec.describe() << ": " << where;
}

void run_step_everywhere(const CaseSpec& spec, AttentionType type) {
  for (cpu::CpuIsa isa : cpu::runnable_cpu_isas()) {
    cpu::set_cpu_isa_override(isa);
    run_step(spec, type, spec.seed + 7);
  }
  cpu::set_cpu_isa_override(std::nullopt);
}

TEST(CpuFlashBackend, DecoderStepWritesTheCacheAndAttends) {
  CaseSpec s;
  s.num_heads = 8;
  s.num_kv_heads = 2;
  s.head_size = s.head_size_v = 128;
  s.q_dtype = s.kv_dtype = ScalarType::kBFloat16;
  s.q_lens = {1, 1, 19};
  s.kv_lens = {1, 700, 40};
  run_step_everywhere(s, AttentionType::kDecoder);
  s.hnd = true;
  s.kv_dtype = ScalarType::kFp8E4M3;
  s.k_scale = 0.03f;
  s.v_scale = 0.05f;
  s.sliding_window = 50;
  s.sinks = true;
  run_step_everywhere(s, AttentionType::kDecoder);
}

TEST(CpuFlashBackend, EveryKvCacheDtypeFromEveryComputeDtype) {
  const ScalarType computes[] = {ScalarType::kFloat32, ScalarType::kFloat16, ScalarType::kBFloat16};
  const ScalarType caches[] = {ScalarType::kFloat32, ScalarType::kFloat16, ScalarType::kBFloat16,
                               ScalarType::kFp8E4M3, ScalarType::kFp8E5M2};
  uint64_t seed = 40;
  for (ScalarType q : computes) {
    for (ScalarType kv : caches) {
      CaseSpec s;
      s.num_heads = 4;
      s.num_kv_heads = 2;
      s.head_size = s.head_size_v = 64;
      s.q_dtype = q;
      s.kv_dtype = kv;
      if (kv == ScalarType::kFp8E4M3 || kv == ScalarType::kFp8E5M2) s.k_scale = s.v_scale = 0.5f;
      s.q_lens = {1, 9};
      s.kv_lens = {90, 30};
      s.soft_cap = 2.0f;
      s.seed = seed++;
      run_step(s, AttentionType::kDecoder, s.seed);
    }
  }
}

TEST(CpuFlashBackend, ChunkedLocalPrefill) {
  CaseSpec s;
  s.num_heads = 4;
  s.num_kv_heads = 1;
  s.head_size = s.head_size_v = 64;
  s.chunk_size = 32;
  s.q_lens = {100, 1};
  s.kv_lens = {130, 70};
  run_step_everywhere(s, AttentionType::kDecoder);
}

TEST(CpuFlashBackend, MlaLatentCache) {
  CaseSpec s;
  s.num_heads = 16;
  s.num_kv_heads = 1;
  s.head_size = 576;
  s.head_size_v = 512;
  s.mla = true;
  s.q_dtype = s.kv_dtype = ScalarType::kBFloat16;
  s.q_lens = {1, 4};
  s.kv_lens = {300, 20};
  run_step_everywhere(s, AttentionType::kDecoder);
}

TEST(CpuFlashBackend, EncoderOnlyAndEncoderAttendOverFreshRows) {
  CaseSpec s;
  s.num_heads = 4;
  s.num_kv_heads = 4;
  s.head_size = s.head_size_v = 64;
  s.contiguous = true;
  s.contiguous_gap = 0;
  s.causal = false;
  s.q_lens = {7, 33};
  s.kv_lens = {7, 33};
  run_step_everywhere(s, AttentionType::kEncoderOnly);
  run_step_everywhere(s, AttentionType::kEncoder);
}

TEST(CpuFlashBackend, CrossAttentionReadsTheFilledCache) {
  CaseSpec s;
  s.num_heads = 6;
  s.num_kv_heads = 6;
  s.head_size = s.head_size_v = 64;
  s.causal = false;
  s.q_lens = {1, 3};
  s.kv_lens = {1500, 20};
  run_step_everywhere(s, AttentionType::kEncoderDecoder);
  // The step that caches the encoder K/V: more fresh rows than query tokens.
  run_step(s, AttentionType::kEncoderDecoder, 5, /*cross_fill=*/true);
}

TEST(CpuFlashBackend, MlaReadsValuesWithTheKeyScale) {
  CaseSpec s;
  s.num_heads = 8;
  s.num_kv_heads = 1;
  s.head_size = 576;
  s.head_size_v = 512;
  s.mla = true;
  s.kv_dtype = ScalarType::kFp8E4M3;
  s.k_scale = 0.02f;
  s.v_scale = 7.0f;  // must be ignored: V was written with k_scale
  s.q_lens = {1, 3};
  s.kv_lens = {200, 30};
  run_step(s, AttentionType::kDecoder, 9);
}

TEST(CpuFlashBackend, CapabilitiesValidateTheirOwnClaims) {
  auto b = make_cpu_flash_backend();
  EXPECT_EQ(b->name(), "CPU_FLASH");
  const Platform cpu = cpu_platform();
  SelectorConfig ok;
  ok.head_size = ok.head_size_v = 128;
  EXPECT_TRUE(b->validate(ok, cpu).empty());
  SelectorConfig mla;
  mla.use_mla = true;
  mla.head_size = 576;
  mla.head_size_v = 512;
  mla.mla_rope_dim = 64;
  mla.kv_cache_dtype = KvCacheDType::kFp8E4M3;
  EXPECT_TRUE(b->validate(mla, cpu).empty());
  SelectorConfig odd = ok;
  odd.head_size = 72;
  ASSERT_EQ(b->validate(odd, cpu).size(), 1u);
  EXPECT_NE(b->validate(odd, cpu)[0].find("72"), std::string::npos);
  SelectorConfig odd_v = ok;
  odd_v.head_size_v = 600;
  ASSERT_EQ(b->validate(odd_v, cpu).size(), 1u);
  EXPECT_NE(b->validate(odd_v, cpu)[0].find("600"), std::string::npos);
  SelectorConfig invariant = ok;
  invariant.batch_invariant = true;
  EXPECT_EQ(b->validate(invariant, cpu).size(), 1u);
  EXPECT_FALSE(b->validate(ok, parse_platform("cuda:9.0")).empty());
  const BackendCapabilities& caps = b->capabilities();
  EXPECT_TRUE(caps.head_sizes.allows(16) && caps.head_sizes.allows(576));
  EXPECT_FALSE(caps.head_sizes.allows(592));
  EXPECT_EQ(caps.attention_types.size(), 4u);
}

TEST(CpuFlashBackend, BadInputsAreErrorsNamingTheValue) {
  CaseSpec s;
  s.q_lens = {2};
  s.kv_lens = {20};
  AttentionCase c(s);
  AttentionLayerParams layer;
  layer.num_heads = s.num_heads;
  layer.num_kv_heads = s.num_kv_heads;
  layer.head_size = layer.head_size_v = s.head_size;
  layer.dtype = DType::kFloat32;
  auto backend = make_cpu_flash_backend();

  AttentionLayerParams bad_layer = layer;
  bad_layer.head_size = 72;
  EXPECT_THROW(backend->make_impl(bad_layer), Error);

  KvCacheSpec kv;
  auto builder = backend->make_builder(kv, layer);
  CommonAttentionMetadata common;
  common.num_reqs = 1;
  common.query_start_loc = {0, 2};
  common.seq_lens = {20};
  common.num_actual_tokens = 2;
  common.block_table = c.block_table();
  common.max_blocks_per_req = c.max_blocks();
  common.block_size = s.block_size;
  common.slot_mapping = {-1, -1};
  CommonAttentionMetadata broken = common;
  broken.seq_lens = {20, 3};
  try {
    builder->build(broken);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("seq_lens has 2 entries"), std::string::npos) << e.what();
  }
  broken = common;
  broken.max_blocks_per_req = 1;
  EXPECT_THROW(builder->build(broken), Error);

  const AttentionMetadata& meta = builder->build(common);
  auto impl = backend->make_impl(layer);
  const int H = s.num_heads, KV = s.num_kv_heads, d = s.head_size;
  TensorView q = view3(c.q_bytes().data(), ScalarType::kFloat32, 2, H, d, c.q_token_stride());
  TensorView out = view3(c.out_bytes().data(), ScalarType::kFloat32, 2, H, d, c.o_token_stride());
  KvCacheTensors cache;
  cache.block_size = s.block_size;
  cache.key = TensorView::contiguous(c.k_bytes().data(), ScalarType::kFloat32,
                                     {c.num_blocks(), s.block_size, KV, d});
  cache.value = TensorView::contiguous(c.v_bytes().data(), ScalarType::kFloat32,
                                       {c.num_blocks(), s.block_size, KV, d});
  EXPECT_NO_THROW(impl->forward(q, {}, {}, cache, meta, out));

  TensorView wrong_dtype = q;
  wrong_dtype.dtype = ScalarType::kBFloat16;
  try {
    impl->forward(wrong_dtype, {}, {}, cache, meta, out);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bfloat16"), std::string::npos) << e.what();
  }
  KvCacheTensors small = cache;
  small.key.shape[0] = 1;  // the block table points past it
  small.value.shape[0] = 1;
  EXPECT_THROW(impl->forward(q, {}, {}, small, meta, out), Error);
  KvCacheTensors wrong_heads = cache;
  wrong_heads.key.shape[2] = KV + 1;
  EXPECT_THROW(impl->forward(q, {}, {}, wrong_heads, meta, out), Error);
}

}  // namespace
}  // namespace attnkit
