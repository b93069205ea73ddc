// When CUDA_FLASH folds the cache update into the attention launch (CPU only, runs in CI):
// causal self-attention with the cache in the compute dtype and unit scales, in decode plans,
// or in plans with prefill (large-row) items when those run on the Hopper kernels and the
// inputs' rows are 16-byte aligned; every other step keeps the separate cache-update
// launch. The GPU conformance cases check the folded writes byte for byte.

#include <gtest/gtest.h>

#include "attnkit/build_config.h"

#if ATTNKIT_HAS_CUDA

#include "backends/cuda_flash/flash_kernels.h"

namespace attnkit::cuda {
namespace {

struct Step {
  CacheUpdateParams update;
  PagedAttentionParams params;
  DevicePlan plan;
};

Step decode_step() {
  Step s;
  s.params.q_dtype = s.params.kv_dtype = ScalarType::kBFloat16;
  s.params.num_heads = 32;
  s.params.num_kv_heads = 8;
  s.params.head_size = s.params.head_size_v = 128;
  s.params.causal = true;
  alignas(16) static const uint16_t key[8] = {}, value[8] = {};
  s.update.key = &key;
  s.update.value = &value;
  s.update.src_dtype = s.update.kv_dtype = ScalarType::kBFloat16;
  s.update.key_token_stride = s.update.value_token_stride = 8 * 128;
  s.update.key_head_stride = s.update.value_head_stride = 128;
  s.update.num_tokens = 4;
  s.update.num_kv_heads = 8;
  s.update.head_size = s.update.head_size_v = 128;
  s.plan.num_small = 12;
  return s;
}

TEST(CudaFoldCacheUpdate, DecodePlanFolds) {
  const Step s = decode_step();
  EXPECT_TRUE(can_fold_cache_update(s.update, s.params, s.plan, false));
  EXPECT_TRUE(can_fold_cache_update(s.update, s.params, s.plan, true));
}

TEST(CudaFoldCacheUpdate, PrefillPlanFoldsOnTheHopperKernels) {
  Step s = decode_step();
  s.plan.num_large = 3;
  s.plan.num_small = 0;
  EXPECT_EQ(can_fold_cache_update(s.update, s.params, s.plan, true),
            ATTNKIT_FLASH_FOLD_PREFILL_WRITE != 0);
  // The sm_80 large-row CTAs would copy the step's keys once per row tile.
  EXPECT_FALSE(can_fold_cache_update(s.update, s.params, s.plan, false));
  // The Hopper kernels copy the step's rows by cp.async: 16-byte aligned rows only.
  s.update.key_token_stride = 8 * 128 + 4;
  EXPECT_FALSE(can_fold_cache_update(s.update, s.params, s.plan, true));
  s = decode_step();
  s.plan.num_large = 3;
  s.update.value = reinterpret_cast<const char*>(s.update.value) + 2;
  EXPECT_FALSE(can_fold_cache_update(s.update, s.params, s.plan, true));
}

TEST(CudaFoldCacheUpdate, EveryOtherStepKeepsTheCacheUpdateLaunch) {
  Step s = decode_step();
  s.plan.num_large = 1;  // a prefill row tile on the sm_80 kernels
  EXPECT_FALSE(can_fold_cache_update(s.update, s.params, s.plan, false));
  s = decode_step();
  s.params.causal = false;  // cross/encoder: new keys are not the last q_len positions
  EXPECT_FALSE(can_fold_cache_update(s.update, s.params, s.plan, true));
  s = decode_step();
  s.update.kv_dtype = ScalarType::kFp8E4M3;  // needs a conversion
  EXPECT_FALSE(can_fold_cache_update(s.update, s.params, s.plan, true));
  s = decode_step();
  s.update.src_dtype = ScalarType::kFloat16;
  EXPECT_FALSE(can_fold_cache_update(s.update, s.params, s.plan, true));
  s = decode_step();
  s.update.k_scale = 0.5f;  // a scale on the write
  EXPECT_FALSE(can_fold_cache_update(s.update, s.params, s.plan, true));
  s = decode_step();
  s.update.value = nullptr;  // MLA layout (latent only)
  EXPECT_FALSE(can_fold_cache_update(s.update, s.params, s.plan, true));
  s = decode_step();
  s.plan.num_small = 0;
  EXPECT_FALSE(can_fold_cache_update(s.update, s.params, s.plan, true));
}

}  // namespace
}  // namespace attnkit::cuda

#endif  // ATTNKIT_HAS_CUDA
