// The reference cache update on its own: slots through the strides (NHD and HND), padding
// slots skipped, quantisation x / scale with round-to-nearest-even and fp8 saturation, and
// MLA's key-only write.

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "attnkit/core/numeric.h"
#include "backends/reference/reference_kernels.h"

namespace attnkit {
namespace {

constexpr uint8_t kUntouched = 0x5a;  // a byte pattern no write produces here

TEST(ReferenceCacheUpdate, Fp8NhdQuantisesSaturatesAndSkipsPadding) {
  // 2 tokens x 1 head x 3 dims; block_size 2, 3 blocks; NHD [3, 2, 1, 3].
  const std::vector<float> key = {1.0f, 300.0f, -0.3f, 0.1f, -1000.0f, 2.0f};
  const std::vector<float> value = {0.5f, 0.25f, -7.0f, 3.0f, 1.0f, -1.0f};
  std::vector<uint8_t> kc(18, kUntouched), vc(18, kUntouched);
  const std::vector<int64_t> slots = {5, -1};
  CacheUpdateParams p;
  p.key = key.data();
  p.value = value.data();
  p.key_token_stride = p.value_token_stride = 3;
  p.key_head_stride = p.value_head_stride = 3;
  p.k_cache = kc.data();
  p.v_cache = vc.data();
  p.kv_dtype = ScalarType::kFp8E4M3;
  p.k_scale = 0.5f;
  p.v_scale = 2.0f;
  p.k_block_stride = p.v_block_stride = 6;
  p.k_token_stride = p.v_token_stride = 3;
  p.k_head_stride = p.v_head_stride = 3;
  p.slot_mapping = slots.data();
  p.num_tokens = 2;
  p.num_kv_heads = 1;
  p.head_size = p.head_size_v = 3;
  p.block_size = 2;
  reference_cache_update(p);
  // Slot 5 = block 2, offset 1: elements 15..17.
  for (int i = 0; i < 15; ++i) EXPECT_EQ(kc[i], kUntouched) << i;
  EXPECT_EQ(kc[15], float_to_fp8_e4m3(2.0f));
  EXPECT_EQ(fp8_e4m3_to_float(kc[16]), kFp8E4M3Max);  // 600 saturates to 448
  EXPECT_EQ(kc[17], float_to_fp8_e4m3(-0.6f));
  EXPECT_EQ(vc[15], float_to_fp8_e4m3(0.25f));
  EXPECT_EQ(vc[17], float_to_fp8_e4m3(-3.5f));
}

TEST(ReferenceCacheUpdate, Bf16HndRoundsToNearestEvenThroughTheStrides) {
  // 1 token, 2 heads, 2 dims; HND [2 blocks, 2 heads, block 4, 2]: head stride 8, token 2.
  const float tie = 1.0f + 1.0f / 256.0f;    // halfway between two bf16 values
  const float above = 1.0f + 3.0f / 512.0f;  // above the halfway point
  const std::vector<float> key = {tie, above, -tie, 5.0f};
  std::vector<uint16_t> kc(32, 0x5a5a);
  const std::vector<int64_t> slots = {6};  // block 1, offset 2
  CacheUpdateParams p;
  p.key = key.data();
  p.key_token_stride = 4;
  p.key_head_stride = 2;
  p.k_cache = kc.data();
  p.kv_dtype = ScalarType::kBFloat16;
  p.k_block_stride = 16;
  p.k_token_stride = 2;
  p.k_head_stride = 8;
  p.slot_mapping = slots.data();
  p.num_tokens = 1;
  p.num_kv_heads = 2;
  p.head_size = 2;
  p.head_size_v = 2;
  p.block_size = 4;
  reference_cache_update(p);  // value == nullptr: the MLA form, key only
  EXPECT_EQ(bf16_bits_to_float(kc[16 + 0 * 8 + 2 * 2 + 0]), 1.0f);  // tie rounds to even
  EXPECT_EQ(bf16_bits_to_float(kc[16 + 0 * 8 + 2 * 2 + 1]), 1.0f + 1.0f / 128.0f);
  EXPECT_EQ(bf16_bits_to_float(kc[16 + 1 * 8 + 2 * 2 + 0]), -1.0f);
  EXPECT_EQ(bf16_bits_to_float(kc[16 + 1 * 8 + 2 * 2 + 1]), 5.0f);
  int touched = 0;
  for (uint16_t b : kc) touched += b != 0x5a5a;
  EXPECT_EQ(touched, 4);
}

}  // namespace
}  // namespace attnkit
