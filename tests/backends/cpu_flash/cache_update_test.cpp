// The cache-update (slot-mapping write) kernel on every SIMD target: exact bytes against
// numeric.h's conversions, padding slots skipped, nothing else touched.

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "attnkit/core/numeric.h"
#include "attnkit/kernels/cpu_isa.h"
#include "backends/cpu_flash/flash_attention.h"

namespace attnkit::cpu {
namespace {

void check_update(CpuIsa isa, ScalarType src, ScalarType dst, bool hnd, float scale) {
  const int T = 7, KV = 3, d = 48, dv = 32, bs = 4, nb = 5;
  std::mt19937 rng(static_cast<unsigned>(static_cast<int>(src) * 31 + static_cast<int>(dst)));
  std::uniform_real_distribution<float> uni(-3.0f, 3.0f);
  std::vector<float> kf(static_cast<size_t>(T) * KV * d), vf(static_cast<size_t>(T) * KV * dv);
  for (float& x : kf) x = uni(rng);
  for (float& x : vf) x = uni(rng);
  kf[5] = 1e6f;    // beyond every 8/16-bit range: fp8 saturates, fp16 overflows
  kf[6] = -1e-7f;  // an fp8/fp16 denormal or zero
  std::vector<uint8_t> key(kf.size() * size_of(src)), value(vf.size() * size_of(src));
  for (size_t i = 0; i < kf.size(); ++i)
    store_from_float(key.data(), src, static_cast<int64_t>(i), kf[i]);
  for (size_t i = 0; i < vf.size(); ++i)
    store_from_float(value.data(), src, static_cast<int64_t>(i), vf[i]);
  std::vector<uint8_t> kc(static_cast<size_t>(nb) * bs * KV * d * size_of(dst), 0xA5);
  std::vector<uint8_t> vc(static_cast<size_t>(nb) * bs * KV * dv * size_of(dst), 0x5A);
  const std::vector<int64_t> slots{13, -1, 0, 19, 6, -1, 7};

  CacheUpdateParams p;
  p.key = key.data();
  p.value = value.data();
  p.src_dtype = src;
  p.key_token_stride = KV * d;
  p.key_head_stride = d;
  p.value_token_stride = KV * dv;
  p.value_head_stride = dv;
  p.k_cache = kc.data();
  p.v_cache = vc.data();
  p.kv_dtype = dst;
  p.k_scale = scale;
  p.v_scale = scale * 0.5f;
  p.k_block_stride = bs * KV * d;
  p.v_block_stride = bs * KV * dv;
  p.k_token_stride = hnd ? d : KV * d;
  p.k_head_stride = hnd ? bs * d : d;
  p.v_token_stride = hnd ? dv : KV * dv;
  p.v_head_stride = hnd ? bs * dv : dv;
  p.slot_mapping = slots.data();
  p.num_tokens = T;
  p.num_kv_heads = KV;
  p.head_size = d;
  p.head_size_v = dv;
  p.block_size = bs;

  std::vector<uint8_t> k_want = kc, v_want = vc;
  for (int t = 0; t < T; ++t) {
    const int64_t slot = slots[static_cast<size_t>(t)];
    if (slot < 0) continue;
    for (int h = 0; h < KV; ++h) {
      for (int x = 0; x < d; ++x) {
        const float f = load_as_float(key.data(), src, (int64_t{t} * KV + h) * d + x);
        store_from_float(
            k_want.data(), dst,
            slot / bs * p.k_block_stride + slot % bs * p.k_token_stride + h * p.k_head_stride + x,
            f / p.k_scale);
      }
      for (int x = 0; x < dv; ++x) {
        const float f = load_as_float(value.data(), src, (int64_t{t} * KV + h) * dv + x);
        store_from_float(
            v_want.data(), dst,
            slot / bs * p.v_block_stride + slot % bs * p.v_token_stride + h * p.v_head_stride + x,
            f / p.v_scale);
      }
    }
  }
  cache_update(p, isa);
  EXPECT_TRUE(kc == k_want) << to_string(isa) << " " << to_string(src) << " -> " << to_string(dst);
  EXPECT_TRUE(vc == v_want) << to_string(isa) << " " << to_string(src) << " -> " << to_string(dst);
}

TEST(CpuCacheUpdate, ExactBytesForEveryDtypePairOnEveryTarget) {
  for (CpuIsa isa : runnable_cpu_isas()) {
    for (ScalarType src : {ScalarType::kFloat32, ScalarType::kFloat16, ScalarType::kBFloat16}) {
      for (ScalarType dst : {ScalarType::kFloat32, ScalarType::kFloat16, ScalarType::kBFloat16,
                             ScalarType::kFp8E4M3, ScalarType::kFp8E5M2}) {
        const bool fp8 = dst == ScalarType::kFp8E4M3 || dst == ScalarType::kFp8E5M2;
        check_update(isa, src, dst, false, fp8 ? 0.25f : 1.0f);
        check_update(isa, src, dst, true, fp8 ? 3.0f : 1.0f);
      }
    }
  }
}

}  // namespace
}  // namespace attnkit::cpu
