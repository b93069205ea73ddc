// CUDA_PAGED: paged attention on CUDA cores, for any head size that is a multiple of 16 up
// to 256 and K/V stored as fp16, bf16 or fp8 (e4m3/e5m2, dequantised with k/v_scale).
//
// One CTA (4 warps) runs one CudaWorkItem of up to kR packed rows for one KV head: 4, or 8
// where the KV head has more query heads than 4 and its rows are short enough
// (paged_rows_per_cta), so that one CTA reads each K/V row for all of them.
// The warps split the item's key range into tiles of `keys` keys (warp w takes tiles w,
// w+4, ...) and each keeps its own online-softmax state; the epilogue merges the four
// states in shared memory.
//
// Staging. Each warp streams its tiles into its own ring of kStages shared-memory stages
// with cp.async, one stage per K tile or V tile, in the order K0 V0 K1 V1 ...: while it
// computes on one stage, the next kStages - 1 are in flight (the bytes in flight live in
// shared memory, not registers). A copying lane computes its own key's row address from
// the block table (read one tile ahead), no shuffles.
//
// Lanes. A tile has keys = 32 / G keys, G = 1, 2 or 4 "row groups": lane l scores key
// l % keys against rows (l / keys) * R/G .. +R/G-1, the whole dot product on one lane
// (K from the staged tile, the query rows as fp32 broadcasts from shared memory), no
// shuffle reductions. G is the smallest that lets four CTAs fit on an SM (a stage is
// keys x row bytes: 32 keys of rows up to 128 bytes, 16 up to 256, 8 up to 512). P * V:
// lane l owns 8-element output chunk l % (head_size / 8) of all R rows and takes one
// value row per pass, the keys' p as a broadcast from shared memory.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <string>

#include "backends/cuda_paged/paged_kernels.h"
#include "backends/cuda_paged/paged_steps.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/kernel_launch.cuh"
#include "kernels/cuda/mma_primitives.cuh"
#include "kernels/cuda/split_kv_combine.cuh"

namespace attnkit::cuda {
namespace {

using namespace paged;  // the kernel's steps and shapes (paged_steps.cuh)

template <typename T, typename Kv, int kGroups, int kR>
__global__ void __launch_bounds__(kWarps * 32, kCtasPerSm)
    paged_attention_kernel(PagedAttentionParams p, const CudaWorkItem* items, float* partial_o,
                           float* partial_lse) {
  constexpr int kKeys = 32 / kGroups;
  constexpr int kRowsPerLane = kR / kGroups;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ __align__(16) float s_p[kWarps][32][kR];  // [warp][key of the tile][row]: p
  __shared__ float s_m[kWarps][kR], s_l[kWarps][kR];
  __shared__ KeyWindow s_window[kR];  // the visible keys [lo, hi] of each row

  const CudaWorkItem item = items[blockIdx.x];
  const int kv_head = blockIdx.y;
  const int group = p.num_heads / p.num_kv_heads;
  const int dim = p.head_size;
  const PagedShape shape = PagedShape::with_groups(dim, kKvBytes<Kv>, kGroups, kR);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int rows = min(kR, item.row_end - item.row_begin);

  float* s_q = reinterpret_cast<float*>(smem);
  load_q_rows<T, kR>(p, item, kv_head, group, dim, rows, tid, s_q);

  // Scores: key key_lane of the tile against rows row_group * kRowsPerLane + i.
  const int key_lane = lane % kKeys;
  const int row_group = lane / kKeys;
  const int key_swizzle = key_lane & shape.k_swizzle;
  // The keys each row sees (empty for padding rows), read from shared memory per tile:
  // kept in registers they would cost 2 * kRowsPerLane of them for the whole loop.
  if (tid < kR) {
    const int pos = item.kv_len - item.q_len + (item.row_begin + tid) / group;
    s_window[tid] = tid < rows ? visible_keys(p, pos, item.kv_end) : KeyWindow{1, 0};
  }
  // Copies: key copy_key of the tile, slots copy_part, copy_part + kGroups, ...
  const int copy_key = lane / kGroups;
  const int copy_part = lane % kGroups;
  const int copy_swizzle = copy_key & shape.k_swizzle;
  // P * V: chunk my_chunk of the value rows of keys my_key_slot, + keys_per_pass, ...
  const int keys_per_pass = 32 / shape.chunks;
  const int my_chunk = lane % shape.chunks;
  const int my_key_slot = lane / shape.chunks;  // < keys_per_pass for active value lanes

  float m[kR], l[kR], acc[kR][8];
#pragma unroll
  for (int r = 0; r < kR; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) acc[r][e] = 0.0f;
  }

  const uint32_t ring = smem_address(smem) + shape.q_bytes + warp * kStages * shape.stage_bytes;
  const unsigned char* ring_ptr = smem + shape.q_bytes + warp * kStages * shape.stage_bytes;
  const int tiles = (item.kv_end - item.kv_begin + kKeys - 1) / kKeys;
  const int my_tiles = warp < tiles ? (tiles - warp + kWarps - 1) / kWarps : 0;
  const int loads = 2 * my_tiles;  // K0 V0 K1 V1 ...: load j into stage j % kStages
  auto tile_start = [&](int t) { return item.kv_begin + (warp + t * kWarps) * kKeys; };

  // The copying lane's key of the next K tile to issue, located one tile ahead (the
  // block-table read is then not a round trip in front of the copies), and the V row of
  // the last K tile issued (its V tile is the next load).
  const FastDivmod block_div(p.block_table != nullptr ? p.block_size : 1);
  KeySlot next_key =
      my_tiles > 0 ? locate_key(p, block_div, item, tile_start(0) + copy_key) : KeySlot{-1, 0};
  int64_t pending_v = -1;
  auto issue = [&](int j) {
    const uint32_t stage = ring + (j % kStages) * shape.stage_bytes;
    if ((j & 1) == 0) {
      const RowOffsets rows_at = row_offsets(p, next_key, kv_head);
      const int t = j >> 1;
      if (t + 1 < my_tiles) next_key = locate_key(p, block_div, item, tile_start(t + 1) + copy_key);
      pending_v = rows_at.v;
      copy_row<Kv>(p.k_cache, rows_at.k, stage, shape.k_stride * 16, copy_key, copy_swizzle,
                   copy_part, kGroups, shape.row_slots);
    } else {
      copy_row<Kv>(p.v_cache, pending_v, stage, shape.row_slots * 16, copy_key, 0, copy_part,
                   kGroups, shape.row_slots);
    }
  };

#pragma unroll
  for (int j = 0; j < kStages - 1; ++j) {
    if (j < loads) issue(j);
    cp_async_commit();
  }
  __syncthreads();  // s_q, s_window
  for (int j = 0; j < loads; ++j) {
    cp_async_wait<kStages - 2>();
    __syncwarp();  // load j landed (every lane's copies); stage (j - 1) % kStages is free
    if (j + kStages - 1 < loads) issue(j + kStages - 1);
    cp_async_commit();
    const unsigned char* stage = ring_ptr + (j % kStages) * shape.stage_bytes;
    const int kb = tile_start(j >> 1);
    if ((j & 1) == 0) {
      float x[kRowsPerLane];
      compute_qk<Kv, kRowsPerLane>(x, stage + key_lane * shape.k_stride * 16, key_swizzle,
                                   s_q + row_group * kRowsPerLane * dim, dim, shape.row_slots);
      online_softmax_update<kGroups, kR>(m, l, acc, x, p, s_window + row_group * kRowsPerLane,
                                         kb + key_lane, row_group, s_p[warp][key_lane]);
    } else {
      accumulate_pv<Kv, kR>(acc, stage, shape.row_slots * 16, &s_p[warp][0][0],
                            min(kKeys, item.kv_end - kb), keys_per_pass, my_key_slot, my_chunk);
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with q and its ring: the epilogue reuses them

  float* s_o = reinterpret_cast<float*>(smem);
  store_warp_state<kR>(s_o + warp * kR * dim, s_m, s_l, acc, m, l, dim, keys_per_pass, my_key_slot,
                       my_chunk, lane, warp);
  __syncthreads();
  write_output<T, kR>(p, item, kv_head, group, dim, rows, tid, s_o, s_m, s_l, partial_o,
                      partial_lse);
}

// Lets an instance use the shared memory its largest shape asks for (the dynamic opt-in
// above 48 KiB) and asks for the largest carveout: kCtasPerSm CTAs need 220 KiB or more
// of an SM's 228, which a smaller carveout would not leave them.
template <typename T, typename Kv, int kGroups, int kR>
bool configure_kernel() {
  static const bool configured = [] {
    const auto kernel = paged_attention_kernel<T, Kv, kGroups, kR>;
    allow_dynamic_smem(kernel, max_dynamic_smem_bytes());
    ATTNKIT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                            cudaSharedmemCarveoutMaxShared));
    return true;
  }();
  return configured;
}

template <typename T, typename Kv, int kGroups, int kR>
void launch_grouped(const PagedAttentionParams& p, const CudaWorkItem* items, int count,
                    const DevicePlan& plan, int smem) {
  configure_kernel<T, Kv, kGroups, kR>();
  if (count == 0) return;  // DevicePlan::load_only: configured and loaded above
  paged_attention_kernel<T, Kv, kGroups, kR>
      <<<dim3(count, p.num_kv_heads), kWarps * 32, smem, static_cast<cudaStream_t>(plan.stream)>>>(
          p, items, plan.partial_o, plan.partial_lse);
  ATTNKIT_CUDA_CHECK_LAUNCH(paged_attention_kernel);
}

template <typename T, typename Kv, int kR>
void launch_rows(const PagedAttentionParams& p, const CudaWorkItem* items, int count,
                 const DevicePlan& plan) {
  const PagedShape shape = PagedShape::of(p.head_size, kKvBytes<Kv>, kR);
  const int smem = shape.dynamic_smem_bytes(p.head_size);
  switch (shape.row_groups) {
    case 1:
      if constexpr (kR == 4) return launch_grouped<T, Kv, 1, kR>(p, items, count, plan, smem);
      [[fallthrough]];  // never: 8 rows start at two groups (PagedShape::of)
    case 2:
      return launch_grouped<T, Kv, 2, kR>(p, items, count, plan, smem);
    default:
      return launch_grouped<T, Kv, 4, kR>(p, items, count, plan, smem);
  }
}

template <typename T, typename Kv>
void launch_items(const PagedAttentionParams& p, const CudaWorkItem* items, int count,
                  const DevicePlan& plan) {
  if (count == 0 && !plan.load_only) return;
  const int group = p.num_kv_heads > 0 ? p.num_heads / p.num_kv_heads : 1;
  if constexpr (kKvBytes<Kv> == 2) {
    if (paged_rows_per_cta(p.head_size, kKvBytes<Kv>, group) == 8) {
      return launch_rows<T, Kv, 8>(p, items, count, plan);
    }
  }
  return launch_rows<T, Kv, 4>(p, items, count, plan);
}

template <typename T, typename Kv>
void launch_all(const PagedAttentionParams& p, const DevicePlan& plan) {
  launch_items<T, Kv>(p, plan.small_items, plan.num_small, plan);
  launch_items<T, Kv>(p, plan.large_items, plan.num_large, plan);
  launch_split_kv_combine<T>(p, plan);
}

template <typename T>
void launch_for_compute_dtype(const PagedAttentionParams& p, const DevicePlan& plan) {
  switch (p.kv_dtype) {
    case ScalarType::kFloat16:
      return launch_all<T, __half>(p, plan);
    case ScalarType::kBFloat16:
      return launch_all<T, __nv_bfloat16>(p, plan);
    case ScalarType::kFp8E4M3:
      return launch_all<T, Fp8E4M3Tag>(p, plan);
    case ScalarType::kFp8E5M2:
      return launch_all<T, Fp8E5M2Tag>(p, plan);
    default:
      throw Error(ErrorCode::kUnsupported,
                  "CUDA_PAGED: KV dtype " + std::string(to_string(p.kv_dtype)) +
                      " not supported (supported: float16, bfloat16, fp8_e4m3, fp8_e5m2)");
  }
}

template <typename Kv, int kGroups, int kR>
int resident_ctas(int head_size) {
  const auto kernel = paged_attention_kernel<__nv_bfloat16, Kv, kGroups, kR>;
  configure_kernel<__nv_bfloat16, Kv, kGroups, kR>();
  int ctas = 0;
  ATTNKIT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
      &ctas, kernel, kWarps * 32,
      PagedShape::with_groups(head_size, kKvBytes<Kv>, kGroups, kR).dynamic_smem_bytes(head_size)));
  return ctas;
}

template <typename Kv, int kR>
int resident_ctas_of(int head_size) {
  switch (PagedShape::of(head_size, kKvBytes<Kv>, kR).row_groups) {
    case 1:
      if constexpr (kR == 4) return resident_ctas<Kv, 1, kR>(head_size);
      [[fallthrough]];  // never: 8 rows start at two groups (PagedShape::of)
    case 2:
      return resident_ctas<Kv, 2, kR>(head_size);
    default:
      return resident_ctas<Kv, 4, kR>(head_size);
  }
}

}  // namespace

KernelGeometry paged_geometry(int head_size, int kv_bytes, int group) {
  // Decode CTAs resident per SM (kCtasPerSm by construction on sm_90; fewer where an SM
  // has less shared memory), asked of the runtime once per head size, cache element size
  // and row count (fp8 e5m2 stages are as large as e4m3's). Split lengths are multiples of
  // the four warps' largest tiles (4 x 32 keys), so that no warp gets a partial round.
  // Per head size: 16-bit caches with 4 rows, with 8, fp8 caches (always 4 rows).
  static std::array<std::atomic<int>, 3 * (kMaxHead / 16 + 1)> ctas_by_shape{};
  const int size = std::clamp(head_size, 16, kMaxHead) / 16 * 16;
  const bool fp8 = kv_bytes == 1;
  const int rows = paged_rows_per_cta(size, fp8 ? 1 : 2, group);
  const int kind = fp8 ? 2 : rows == 8 ? 1 : 0;
  std::atomic<int>& cached = ctas_by_shape[kind * (kMaxHead / 16 + 1) + size / 16];
  int ctas = cached.load(std::memory_order_relaxed);
  if (ctas == 0) {
    if (fp8) {
      ctas = resident_ctas_of<Fp8E4M3Tag, 4>(size);  // fp8 caches run 4 rows
    } else {
      ctas = rows == 8 ? resident_ctas_of<__nv_bfloat16, 8>(size)
                       : resident_ctas_of<__nv_bfloat16, 4>(size);
    }
    ctas = std::max(ctas, 1);
    cached.store(ctas, std::memory_order_relaxed);
  }
  return {rows, rows, kWarps * 32, ctas};
}

void launch_paged_attention(const PagedAttentionParams& p, const DevicePlan& plan) {
  if (p.head_size % 16 != 0 || p.head_size > kMaxHead || p.head_size_v != p.head_size) {
    throw Error(ErrorCode::kUnsupported,
                "CUDA_PAGED: head_size " + std::to_string(p.head_size) + " / head_size_v " +
                    std::to_string(p.head_size_v) +
                    " not supported (supported: equal, multiples of 16 up to 256)");
  }
  switch (p.q_dtype) {
    case ScalarType::kFloat16:
      return launch_for_compute_dtype<__half>(p, plan);
    case ScalarType::kBFloat16:
      return launch_for_compute_dtype<__nv_bfloat16>(p, plan);
    default:
      throw Error(ErrorCode::kUnsupported, "CUDA_PAGED: dtype " +
                                               std::string(to_string(p.q_dtype)) +
                                               " not supported (supported: float16, bfloat16)");
  }
}

}  // namespace attnkit::cuda
