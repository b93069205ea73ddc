// Which K/V tiles the Hopper prefill kernel loads with the copy engine (TMA): the tensor
// maps are built at head size 64 for paged 16-bit caches whose block size is a multiple
// of 8, at least 64, that divides into or out of the kernel's key tile, with 16-byte aligned
// addresses and strides, and for nothing else (those tiles go by cp.async; cuda_gpu_test.cpp runs
// both). Needs the driver's tensor-map encoder, so it runs where a GPU is.

#include <gtest/gtest.h>

#include <cstdint>

#include "attnkit/build_config.h"
#include "attnkit/kernels/paged_attention_params.h"
#include "gpu_harness.h"

#if ATTNKIT_CUDA_SM90A
#include "backends/cuda_flash/flash_wgmma.h"
#endif

namespace attnkit::testing {
namespace {

#if ATTNKIT_CUDA_SM90A
// A paged bf16 cache (never dereferenced: encoding a map reads no memory).
PagedAttentionParams paged(int head_size, int block_size, bool hnd) {
  static const int32_t block_table[1] = {0};
  PagedAttentionParams p;
  p.q_dtype = ScalarType::kBFloat16;
  p.kv_dtype = ScalarType::kBFloat16;
  p.num_heads = 32;
  p.num_kv_heads = 8;
  p.head_size = head_size;
  p.head_size_v = head_size;
  p.block_size = block_size;
  p.block_table = block_table;
  p.block_table_stride = 1;
  const int64_t block_stride = int64_t{block_size} * p.num_kv_heads * head_size;
  p.k_block_stride = p.v_block_stride = block_stride;
  p.k_token_stride = p.v_token_stride = hnd ? head_size : int64_t{p.num_kv_heads} * head_size;
  p.k_head_stride = p.v_head_stride = hnd ? int64_t{block_size} * head_size : head_size;
  p.k_cache = reinterpret_cast<const void*>(uintptr_t{1} << 32);
  p.v_cache = reinterpret_cast<const void*>((uintptr_t{1} << 32) + (uintptr_t{1} << 28));
  return p;
}
#endif

TEST(FlashWgmmaCopyEngineGpuTest, MapsOnlyForLayoutsTheCopyEngineTakes) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA GPU on this machine (or a build without CUDA)";
#if !ATTNKIT_CUDA_SM90A
  GTEST_SKIP() << "built without the sm_90a kernels";
#else
  // Head size 64: boxes of one block, or of one key tile (128 keys) when blocks are larger;
  // blocks of fewer than 64 keys go by cp.async.
  EXPECT_EQ(cuda::flash_wgmma_tma_box_rows(paged(64, 64, false)), 64);
  EXPECT_EQ(cuda::flash_wgmma_tma_box_rows(paged(64, 64, true)), 64);
  EXPECT_EQ(cuda::flash_wgmma_tma_box_rows(paged(64, 128, true)), 128);
  EXPECT_EQ(cuda::flash_wgmma_tma_box_rows(paged(64, 256, false)), 128);
  EXPECT_EQ(cuda::flash_wgmma_tma_box_rows(paged(64, 16, false)), 0);
  EXPECT_EQ(cuda::flash_wgmma_tma_box_rows(paged(64, 32, true)), 0);
  EXPECT_EQ(cuda::flash_wgmma_tma_box_rows(paged(64, 8, false)), 0);
  // Head sizes 128 and 256 keep cp.async (their configurations ran slower with the copy
  // engine, bench/results/cuda.md run 69).
  EXPECT_EQ(cuda::flash_wgmma_tma_box_rows(paged(128, 16, false)), 0);
  EXPECT_EQ(cuda::flash_wgmma_tma_box_rows(paged(256, 64, true)), 0);
  // Block sizes the tiles cannot be cut into.
  EXPECT_EQ(cuda::flash_wgmma_tma_box_rows(paged(64, 96, false)), 0);
  EXPECT_EQ(cuda::flash_wgmma_tma_box_rows(paged(64, 192, true)), 0);
  EXPECT_EQ(cuda::flash_wgmma_tma_box_rows(paged(64, 5, false)), 0);
  EXPECT_EQ(cuda::flash_wgmma_tma_box_rows(paged(64, 48, true)), 0);
  EXPECT_EQ(cuda::flash_wgmma_tma_box_rows(paged(64, 4, false)), 0);
  // Contiguous caches (no block table).
  PagedAttentionParams contiguous = paged(64, 64, false);
  contiguous.block_table = nullptr;
  EXPECT_EQ(cuda::flash_wgmma_tma_box_rows(contiguous), 0);
  // A cache address or a stride the copy engine cannot take (16-byte units).
  PagedAttentionParams misaligned = paged(64, 64, false);
  misaligned.v_cache = static_cast<const char*>(misaligned.v_cache) + 8;
  EXPECT_EQ(cuda::flash_wgmma_tma_box_rows(misaligned), 0);
  PagedAttentionParams odd_stride = paged(64, 64, false);
  odd_stride.k_token_stride += 4;
  EXPECT_EQ(cuda::flash_wgmma_tma_box_rows(odd_stride), 0);
  // K and V laid out differently (one NHD, one HND).
  PagedAttentionParams mixed = paged(64, 64, false);
  const PagedAttentionParams hnd = paged(64, 64, true);
  mixed.v_token_stride = hnd.v_token_stride;
  mixed.v_head_stride = hnd.v_head_stride;
  EXPECT_EQ(cuda::flash_wgmma_tma_box_rows(mixed), 0);
  // fp8 caches are staged by cp.async and converted by the producer.
  PagedAttentionParams fp8 = paged(64, 64, false);
  fp8.kv_dtype = ScalarType::kFp8E4M3;
  EXPECT_EQ(cuda::flash_wgmma_tma_box_rows(fp8), 0);
#endif
}

}  // namespace
}  // namespace attnkit::testing
