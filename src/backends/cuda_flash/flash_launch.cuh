#pragma once
// Tile configurations of CUDA_FLASH per head size, and the launch of one work list.
// Prefill and decode each run 2-4 CTAs per SM (budgets next to each configuration); see
// flash_kernel.cuh for the shared-memory layout.

#include "attnkit/build_config.h"
#include "backends/cuda_flash/flash_kernel.cuh"
#include "backends/cuda_flash/flash_wgmma.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernel_launch.cuh"

namespace attnkit::cuda {

// ATTNKIT_FLASH_{PREFILL,DECODE}_D{64,128,256} (template arguments, e.g. through a
// pre-included header) replace a configuration in the alternative builds that
// bench/cuda_device_run.sh measures next to the default ones.
#ifndef ATTNKIT_FLASH_PREFILL_D128
#define ATTNKIT_FLASH_PREFILL_D128 128, 2, 4, 1, 32, 3, false, 2
#endif
#ifndef ATTNKIT_FLASH_DECODE_D64
#define ATTNKIT_FLASH_DECODE_D64 64, 1, 1, 4, 64, 3, true, 4, 8
#endif
#ifndef ATTNKIT_FLASH_DECODE_D128
#define ATTNKIT_FLASH_DECODE_D128 128, 1, 1, 4, 64, 3, true, 2, 8
#endif
#ifndef ATTNKIT_FLASH_DECODE_D256
#define ATTNKIT_FLASH_DECODE_D256 256, 1, 1, 2, 32, 3, true, 2, 8
#endif
// ATTNKIT_FLASH_DECODE_FP8_D128 (the same template arguments, STAGES those of the fp8
// stages themselves) is the head-size-128 decode configuration of fp8 caches only
// (FlashSmallKvConfig, which gives its reasons).
#ifndef ATTNKIT_FLASH_DECODE_FP8_D128
#define ATTNKIT_FLASH_DECODE_FP8_D128 128, 1, 1, 4, 128, 3, true, 2, 8
#endif

// Register and shared-memory budgets below were read off `nvcc -Xptxas -v` (sm_90, nvcc
// 13.0; no spills except the 4 bytes noted); an SM has 64 Ki registers and 227 KiB of
// shared memory.
//
// Prefill ("large rows", 128 rows per CTA): four warps of 32 rows (WM = 2), so every K/V
// fragment read from shared memory feeds two m16 tiles and ldmatrix traffic stays under
// the mma.sync rate; O (WM * D / 2 floats per thread) plus S is what the 255-register
// budget holds, which sets BN. Two CTAs per SM interleave one CTA's softmax with the
// other's matrix work.
//                                   D   WM WARPS_M WARPS_N BN STAGES Q_IN_REGS MIN_CTAS
template <int D>
struct FlashLargeConfig;
template <>
struct FlashLargeConfig<64> {  // 247 registers, 64 KiB shared
  using type = FlashConfig<64, 2, 4, 1, 64, 3, false, 2>;
};
template <>
struct FlashLargeConfig<128> {  // 255 registers, 80 KiB shared
  using type = FlashConfig<ATTNKIT_FLASH_PREFILL_D128>;
};
template <>
struct FlashLargeConfig<256> {  // 64 rows; 255 registers (4-byte spill), 96 KiB shared
  using type = FlashConfig<256, 1, 4, 1, 32, 2, false, 2>;
};
// Decode ("small rows", 16 rows: the GQA heads of a few tokens): memory-bound, so what
// matters is K/V bytes in flight per SM: (STAGES - 1) tiles per CTA times CTAs per SM,
// 64 to 128 KiB here, and the shape of the L2 requests: 8 threads per key row, so one
// cp.async instruction of a warp reads 4 whole 128-byte lines. The warps split every key
// tile (flash-decoding inside a CTA); Q stays in registers. fp8 caches run the same
// configurations with twice the stages in the same shared memory (FlashKvConfig) and
// fragments built in registers: 122 registers at D = 64, 255 at 256 (a 36-byte spill);
// head size 128 has its own (FlashSmallKvConfig).
//                                   D   WM WARPS_M WARPS_N BN STAGES Q_IN_REGS MIN_CTAS
//                                   THREADS_PER_KEY
template <int D>
struct FlashSmallConfig;
template <>
struct FlashSmallConfig<64> {  // 122 registers, 50 KiB shared: 4 CTAs per SM
  using type = FlashConfig<ATTNKIT_FLASH_DECODE_D64>;
};
template <>
struct FlashSmallConfig<128> {  // 193 registers, 100 KiB shared: 2 CTAs per SM
  using type = FlashConfig<ATTNKIT_FLASH_DECODE_D128>;
};
template <>
struct FlashSmallConfig<256> {  // two warps; 254 registers, 104 KiB shared: 2 CTAs per SM
  using type = FlashConfig<ATTNKIT_FLASH_DECODE_D256>;
};

// The decode configuration launched for head size D and a cache stored as KV: the one
// launch_flash_head_size_typed runs and the one flash_geometry plans for (its CTAs per SM
// and key tile, so split-KV pieces are whole 128-key tiles at head size 128 with fp8).
// fp8 caches take FlashSmallConfig's with twice the stages, except at head size 128.
template <int D, typename KV>
struct FlashSmallKvConfig {
  using type = FlashKvConfig<typename FlashSmallConfig<D>::type, KV>;
};
// fp8 at head size 128 (ATTNKIT_FLASH_DECODE_FP8_D128): 128-key tiles, four warps of 32
// keys, 3 stages; 208 registers, 100 KiB shared: 2 CTAs per SM. Its stages hold the same
// 96 KiB as 64-key tiles in 6 stages (64 KiB of them ahead of the tile being computed,
// against 80), and each tile's softmax step (maxima, rescale of O) and warp barrier now
// cover twice the keys: half of that work per key. Measured x0.979 against 64-key tiles
// in 6 stages at batch 64 x 2048 keys (e4m3, 32/8 heads) on an H100.
template <typename KV>
requires kIsFp8<KV>
struct FlashSmallKvConfig<128, KV> {
  using Base = FlashConfig<ATTNKIT_FLASH_DECODE_FP8_D128>;
  using type = FlashKvConfig<Base, KV, Base::STAGES>;
  static_assert(type::kFp8Fragments,
                "an fp8 decode configuration: WM = WARPS_M = 1, Q in registers");
};

// Every launch of flash_attention_kernel is programmatic (kernel_launch.cuh): before
// wait_for_previous_grid it reads only the work items and block table, so its start, those
// loads and the first tiles' address arithmetic overlap the end of the previous grid in
// the stream (this step's cache update, or the previous step's attention), a fixed few
// microseconds that weigh on short decode steps.
template <typename T, typename C>
void launch_flash_items(const PagedAttentionParams& p, const CudaWorkItem* items, int count,
                        const DevicePlan& plan, const CacheUpdateParams& fresh_kv) {
  static const bool configured = allow_dynamic_smem(flash_attention_kernel<T, C>, C::kSmemBytes);
  (void)configured;
  if (count == 0) return;  // and DevicePlan::load_only: loaded above
  flash_trace_bind();      // nothing unless built with ATTNKIT_FLASH_TRACE
  // grid.y is limited to 65535; items go there only in decode grids (kKvHeadInX).
  if (C::kKvHeadInX && count > 65535) {
    throw Error(ErrorCode::kUnsupported, "CUDA_FLASH: " + std::to_string(count) +
                                             " decode work items in one step (at most 65535)");
  }
  const dim3 grid = C::kKvHeadInX ? dim3(p.num_kv_heads, count) : dim3(count, p.num_kv_heads);
  launch_kernel_ex(flash_attention_kernel<T, C>, grid, dim3(C::kThreads), C::kSmemBytes,
                   static_cast<cudaStream_t>(plan.stream), /*programmatic=*/true, p, items,
                   plan.partial_o, plan.partial_lse, plan.split_counters, fresh_kv);
  ATTNKIT_CUDA_CHECK_LAUNCH(flash_attention_kernel);
}

// KV: the cache's storage type, T or an fp8 type (FlashKvConfig).
template <int D, typename T, typename KV>
void launch_flash_head_size_typed(const PagedAttentionParams& p, const DevicePlan& plan,
                                  const FlashLaunchOptions& options) {
  // The cache write is folded into large-row items only on the Hopper kernels
  // (can_fold_cache_update).
  launch_flash_items<T, typename FlashSmallKvConfig<D, KV>::type>(
      p, plan.small_items, plan.num_small, plan, options.fresh_kv);
#if ATTNKIT_CUDA_SM90A
  // The Hopper prefill, 16-bit and fp8 caches (flash_geometry plans its rows).
  if (flash_wgmma_enabled()) {
    launch_flash_wgmma_items(p, plan.large_items, plan.num_large, plan, options.fresh_kv);
    return;
  }
#endif
  if (options.fresh_kv.key != nullptr && plan.num_large > 0) {
    throw Error(ErrorCode::kInternal,
                "CUDA_FLASH: a folded cache write reached the sm_80 large-row kernels, which "
                "read the step's keys from the cache (can_fold_cache_update)");
  }
  launch_flash_items<T, FlashKvConfig<typename FlashLargeConfig<D>::type, KV>>(
      p, plan.large_items, plan.num_large, plan, CacheUpdateParams{});
}

template <int D, typename T>
void launch_flash_cache_dtype(const PagedAttentionParams& p, const DevicePlan& plan,
                              const FlashLaunchOptions& options) {
  switch (p.kv_dtype) {
    case ScalarType::kFp8E4M3:
      return launch_flash_head_size_typed<D, T, Fp8E4M3>(p, plan, options);
    case ScalarType::kFp8E5M2:
      return launch_flash_head_size_typed<D, T, Fp8E5M2>(p, plan, options);
    default:  // the compute dtype (launch_flash_attention checked)
      return launch_flash_head_size_typed<D, T, T>(p, plan, options);
  }
}

template <int D>
void launch_flash_head_size(const PagedAttentionParams& p, const DevicePlan& plan,
                            const FlashLaunchOptions& options) {
  if (p.q_dtype == ScalarType::kFloat16) {
    launch_flash_cache_dtype<D, __half>(p, plan, options);
  } else {
    launch_flash_cache_dtype<D, __nv_bfloat16>(p, plan, options);
  }
}

// Defined in flash_attention_d{64,128,256}.cu (one head size per translation unit keeps
// nvcc's work parallel).
void launch_flash_d64(const PagedAttentionParams& p, const DevicePlan& plan,
                      const FlashLaunchOptions& options);
void launch_flash_d128(const PagedAttentionParams& p, const DevicePlan& plan,
                       const FlashLaunchOptions& options);
void launch_flash_d256(const PagedAttentionParams& p, const DevicePlan& plan,
                       const FlashLaunchOptions& options);

}  // namespace attnkit::cuda
