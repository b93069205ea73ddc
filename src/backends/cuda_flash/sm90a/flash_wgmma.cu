// CUDA_FLASH's Hopper prefill kernels (flash_wgmma_kernel.cuh). This file alone is
// compiled for sm_90a (wgmma and setmaxnreg exist only there), see src/CMakeLists.txt.
#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>

#include "attnkit/core/options.h"
#include "backends/cuda_flash/flash_wgmma.h"
#include "backends/cuda_flash/flash_wgmma_kernel.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernel_launch.cuh"

namespace attnkit::cuda {
namespace {

// Tiles per head size; shared memory from the configuration, no spills (`nvcc -Xptxas -v`,
// sm_90a). Head size 64 loads whole K/V tiles of paged caches with the copy engine when a
// box holds 64 keys or more (blocks of 64 keys or larger); whole tiles of smaller blocks go
// by cp.async in passes of 16 keys, which took x0.89-0.94 of the copy engine's time with
// blocks of 16 keys (bench/results/cuda.md, run 79; run 69 had chosen the copy engine
// before the passes existed). At 128 and 256 every tile goes by cp.async (runs 69 and 72).
// ATTNKIT_FLASH_WGMMA_D{64,128,256} (template arguments, e.g. through a pre-included
// header) replace one in the alternative builds bench/cuda_variant_build.sh makes.
#ifndef ATTNKIT_FLASH_WGMMA_D64
#define ATTNKIT_FLASH_WGMMA_D64 64, 128, 4, true, true, 64
#endif
#ifndef ATTNKIT_FLASH_WGMMA_D128
#define ATTNKIT_FLASH_WGMMA_D128 128, 128, 3, true
#endif
#ifndef ATTNKIT_FLASH_WGMMA_D256
#define ATTNKIT_FLASH_WGMMA_D256 256, 64, 2, true
#endif
// fp8 caches (ATTNKIT_FLASH_WGMMA_FP8_D{64,128,256}): the same tiles, the 16-bit stages
// that fit beside the fp8 staging buffers (the last template argument): two buffers, so
// that a tile's copies overlap the previous tile's conversion, except at head size 256,
// where one is what fits beside two stages.
#ifndef ATTNKIT_FLASH_WGMMA_FP8_D64
#define ATTNKIT_FLASH_WGMMA_FP8_D64 64, 128, 4, true, false, 8, 2
#endif
#ifndef ATTNKIT_FLASH_WGMMA_FP8_D128
#define ATTNKIT_FLASH_WGMMA_FP8_D128 128, 128, 2, true, false, 8, 2
#endif
#ifndef ATTNKIT_FLASH_WGMMA_FP8_D256
#define ATTNKIT_FLASH_WGMMA_FP8_D256 256, 64, 2, true, false, 8, 1
#endif
// The configuration of head size D over a 16-bit cache (kFp8Cache false) or an fp8 one.
// Shared memory: 145, 225 and 193 KiB at head sizes 64, 128 and 256 (16-bit caches); 177,
// 225 and 225 KiB (fp8).
template <int D, bool kFp8Cache>
struct WgmmaTiles {
  static_assert(D == 64 || D == 128 || D == 256, "the head sizes of kFlashHeadSizes");
  template <typename D64, typename D128, typename D256>
  using ByHeadSize = std::conditional_t<D == 64, D64, std::conditional_t<D == 128, D128, D256>>;
  using type = std::conditional_t<kFp8Cache,
                                  ByHeadSize<WgmmaFlashConfig<ATTNKIT_FLASH_WGMMA_FP8_D64>,
                                             WgmmaFlashConfig<ATTNKIT_FLASH_WGMMA_FP8_D128>,
                                             WgmmaFlashConfig<ATTNKIT_FLASH_WGMMA_FP8_D256>>,
                                  ByHeadSize<WgmmaFlashConfig<ATTNKIT_FLASH_WGMMA_D64>,
                                             WgmmaFlashConfig<ATTNKIT_FLASH_WGMMA_D128>,
                                             WgmmaFlashConfig<ATTNKIT_FLASH_WGMMA_D256>>>;
};

// cuTensorMapEncodeTiled, looked up once through the runtime (no link against the driver
// library); nullptr when the driver has none.
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault,
                                         &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      return static_cast<PFN_cuTensorMapEncodeTiled_v12000>(nullptr);
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  return encode;
}

// Element strides of a 16-bit tensor as the byte strides of a tensor map; false when the
// copy engine cannot take one (not a positive multiple of 16 bytes below 2^40).
template <int N>
bool map_byte_strides(const int64_t (&elements)[N], cuuint64_t (&bytes)[N]) {
  for (int i = 0; i < N; ++i) {
    const int64_t b = elements[i] * 2;
    if (b <= 0 || b % 16 != 0 || b >= (int64_t{1} << 40)) return false;
    bytes[i] = static_cast<cuuint64_t>(b);
  }
  return true;
}

// One 16-bit cache as a WgmmaKvMaps tensor map: dimensions (head dimension, slot and KV head
// in the order slot_dim gives, block), boxes of 64 x box_rows elements. The block dimension
// is given its largest extent: the kernel loads only boxes of keys below kv_end, whose
// blocks the block table names. False when the copy engine cannot take the layout.
bool encode_cache_map(CUtensorMap* map, const void* base, int64_t block_stride,
                      int64_t token_stride, int64_t head_stride, int block_size, int num_kv_heads,
                      int head_size, int box_rows, int slot_dim) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  if (encode == nullptr || reinterpret_cast<uintptr_t>(base) % 16 != 0) return false;
  const int64_t strides[3] = {slot_dim == 1 ? token_stride : head_stride,
                              slot_dim == 1 ? head_stride : token_stride, block_stride};
  cuuint64_t global_strides[3];
  if (!map_byte_strides(strides, global_strides)) return false;
  const cuuint64_t dims[4] = {static_cast<cuuint64_t>(head_size),
                              static_cast<cuuint64_t>(slot_dim == 1 ? block_size : num_kv_heads),
                              static_cast<cuuint64_t>(slot_dim == 1 ? num_kv_heads : block_size),
                              static_cast<cuuint64_t>(INT32_MAX)};
  const cuuint32_t box[4] = {64, static_cast<cuuint32_t>(slot_dim == 1 ? box_rows : 1),
                             static_cast<cuuint32_t>(slot_dim == 1 ? 1 : box_rows), 1};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 4, const_cast<void*>(base), dims,
                global_strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// A [token, head, head dimension] tensor of 16-bit rows (the step's K or V input, Q, the
// output; strides in elements) as a three-dimensional map: boxes of 64 elements x box_heads
// heads x box_tokens tokens, 128-byte swizzled (the layout of the kernel's K/V slabs and Q
// buffers). False when the copy engine cannot take it.
bool encode_token_map(CUtensorMap* map, const void* base, int64_t token_stride, int64_t head_stride,
                      int num_tokens, int num_heads, int head_size, int box_heads, int box_tokens) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = tensor_map_encoder();
  if (encode == nullptr || reinterpret_cast<uintptr_t>(base) % 16 != 0 || num_tokens <= 0) {
    return false;
  }
  const int64_t strides[2] = {head_stride, token_stride};
  cuuint64_t global_strides[2];
  if (!map_byte_strides(strides, global_strides)) return false;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(head_size),
                              static_cast<cuuint64_t>(num_heads),
                              static_cast<cuuint64_t>(num_tokens)};
  const cuuint32_t box[3] = {64, static_cast<cuuint32_t>(box_heads),
                             static_cast<cuuint32_t>(box_tokens)};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  return encode(map, CU_TENSOR_MAP_DATA_TYPE_UINT16, 3, const_cast<void*>(base), dims,
                global_strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

// ATTNKIT_FLASH_WGMMA_FRESH_TMA 0 copies the step's own keys by cp.async even where the
// copy engine could (bench/variants, for comparisons).
#ifndef ATTNKIT_FLASH_WGMMA_FRESH_TMA
#define ATTNKIT_FLASH_WGMMA_FRESH_TMA 1
#endif

// The fresh maps of `maps` for a folded step (fresh.key set): fresh_rows BN when both
// inputs could be mapped, 0 otherwise (and always 0 without a fold).
template <typename C>
void add_input_maps(WgmmaKvMaps& maps, const PagedAttentionParams& p,
                    const CacheUpdateParams& fresh) {
  maps.fresh_rows = 0;
  if (!ATTNKIT_FLASH_WGMMA_FRESH_TMA || fresh.key == nullptr || fresh.value == nullptr) return;
  if (encode_token_map(&maps.fresh_k, fresh.key, fresh.key_token_stride, fresh.key_head_stride,
                       fresh.num_tokens, p.num_kv_heads, p.head_size, 1, C::BN) &&
      encode_token_map(&maps.fresh_v, fresh.value, fresh.value_token_stride,
                       fresh.value_head_stride, fresh.num_tokens, p.num_kv_heads, p.head_size_v, 1,
                       C::BN)) {
    maps.fresh_rows = C::BN;
  }
}

// The map dimension of a paged K and V cache's slot (WgmmaKvMaps::slot_dim): 1 before the
// head when its stride is the smaller (HND), 2 after it otherwise (NHD); 0 when K and V
// disagree.
int cache_slot_dim(int64_t k_token_stride, int64_t k_head_stride, int64_t v_token_stride,
                   int64_t v_head_stride) {
  const int k_dim = k_token_stride <= k_head_stride ? 1 : 2;
  const int v_dim = v_token_stride <= v_head_stride ? 1 : 2;
  return k_dim == v_dim ? k_dim : 0;
}

// The step's K/V tensor maps for configuration C; box_rows 0 when the copy engine is not
// used (a configuration without it, contiguous caches, block sizes that are not a multiple
// of 8 or do not divide into or out of the key tile, strides or addresses it cannot take).
template <typename C>
WgmmaKvMaps make_kv_maps(const PagedAttentionParams& p) {
  WgmmaKvMaps maps{};
  maps.box_rows = 0;
  maps.slot_dim = 1;
  const int bs = p.block_size, bn = C::BN;
  if (!C::kCopyEngine || p.block_table == nullptr || bs <= 0 || bs % 8 != 0 ||
      (bs <= bn ? bn % bs != 0 : bs % bn != 0)) {
    return maps;
  }
  const int box_rows = bs < bn ? bs : bn;
  if (box_rows < C::kMinCopyBoxRows) return maps;
  const int slot_dim =
      cache_slot_dim(p.k_token_stride, p.k_head_stride, p.v_token_stride, p.v_head_stride);
  if (slot_dim == 0) return maps;
  if (!encode_cache_map(&maps.k, p.k_cache, p.k_block_stride, p.k_token_stride, p.k_head_stride, bs,
                        p.num_kv_heads, p.head_size, box_rows, slot_dim) ||
      !encode_cache_map(&maps.v, p.v_cache, p.v_block_stride, p.v_token_stride, p.v_head_stride, bs,
                        p.num_kv_heads, p.head_size_v, box_rows, slot_dim)) {
    return maps;
  }
  maps.box_rows = box_rows;
  maps.slot_dim = slot_dim;
  return maps;
}

// ATTNKIT_FLASH_WGMMA_Q_TMA 1 loads each consumer's Q rows with the copy engine where a
// map can describe them (16-bit caches, groups dividing 64, a folded step, whose inputs
// give the token count).
#ifndef ATTNKIT_FLASH_WGMMA_Q_TMA
#define ATTNKIT_FLASH_WGMMA_Q_TMA 1
#endif

// The Q and output maps of `maps` (q_rows, o_rows 64) where the consumers' rows can go by
// the copy engine: groups dividing 64 and a known token count (num_tokens > 0); Q only for
// 16-bit caches (the fp8 configurations rescale bf16 rows as they load them).
template <typename C>
void add_row_maps(WgmmaKvMaps& maps, const PagedAttentionParams& p, int num_tokens) {
  maps.q_rows = 0;
  maps.o_rows = 0;
  const int group = p.num_kv_heads > 0 ? p.num_heads / p.num_kv_heads : 0;
  if (num_tokens <= 0 || group <= 0 || 64 % group != 0) return;
  if (ATTNKIT_FLASH_WGMMA_Q_TMA && !C::kFp8 &&
      encode_token_map(&maps.q, p.q, p.q_token_stride, p.q_head_stride, num_tokens, p.num_heads,
                       p.head_size, group, 64 / group)) {
    maps.q_rows = 64;
  }
  if (kWgmmaOutTma && encode_token_map(&maps.o, p.out, p.o_token_stride, p.o_head_stride,
                                       num_tokens, p.num_heads, p.head_size_v, group, 64 / group)) {
    maps.o_rows = 64;
  }
}

// The folded write's cache maps (write_rows kWriteBoxRows; 0 when not made): a folded step
// (whose own keys come by the copy engine: fresh_rows set) over a paged cache with blocks
// of at least kWriteBoxRows keys and the slot on the same side of the head in K and V.
template <typename C>
void add_write_maps(WgmmaKvMaps& maps, const PagedAttentionParams& p,
                    const CacheUpdateParams& fresh) {
  maps.write_rows = 0;
  maps.write_slot_dim = 1;
  if (!kWgmmaWriteTma || maps.fresh_rows == 0 || p.block_table == nullptr ||
      fresh.block_size < kWriteBoxRows) {
    return;
  }
  const int slot_dim = cache_slot_dim(fresh.k_token_stride, fresh.k_head_stride,
                                      fresh.v_token_stride, fresh.v_head_stride);
  if (slot_dim == 0) return;
  if (encode_cache_map(&maps.write_k, fresh.k_cache, fresh.k_block_stride, fresh.k_token_stride,
                       fresh.k_head_stride, fresh.block_size, p.num_kv_heads, p.head_size,
                       kWriteBoxRows, slot_dim) &&
      encode_cache_map(&maps.write_v, fresh.v_cache, fresh.v_block_stride, fresh.v_token_stride,
                       fresh.v_head_stride, fresh.block_size, p.num_kv_heads, p.head_size_v,
                       kWriteBoxRows, slot_dim)) {
    maps.write_rows = kWriteBoxRows;
    maps.write_slot_dim = slot_dim;
  }
}

// The cache maps (make_kv_maps) and, for a folded step, the inputs' and the folded write's
// (add_input_maps, add_row_maps, add_write_maps).
template <typename C>
WgmmaKvMaps make_step_maps(const PagedAttentionParams& p, const CacheUpdateParams& fresh) {
  WgmmaKvMaps maps = make_kv_maps<C>(p);
  add_input_maps<C>(maps, p, fresh);
  add_row_maps<C>(maps, p, fresh.key != nullptr ? fresh.num_tokens : 0);
  add_write_maps<C>(maps, p, fresh);
  return maps;
}

// KV: the cache's storage type, T or an fp8 type. fresh.key set: the launch also writes the
// step's new keys/values into the cache (the kFold kernels; 16-bit caches only).
template <int D, typename T, typename KV>
void launch_typed(const PagedAttentionParams& p, const CudaWorkItem* items, int count,
                  const DevicePlan& plan, const CacheUpdateParams& fresh) {
  using C = typename WgmmaTiles<D, kIsFp8<KV>>::type;
  static_assert(C::kSmemBytes <= 227u * 1024u, "an SM's shared memory");
  constexpr bool kCanFold = !kIsFp8<KV>;
  static const bool configured =
      allow_dynamic_smem(flash_wgmma_kernel<T, KV, C, false>, C::kSmemBytes) &&
      (!kCanFold || allow_dynamic_smem(flash_wgmma_kernel<T, KV, C, kCanFold>, C::kSmemBytes));
  (void)configured;
  if (count == 0) return;  // and DevicePlan::load_only: loaded above
  flash_trace_bind();      // the split merge's marks; nothing unless built with ATTNKIT_FLASH_TRACE
  const bool fold = fresh.key != nullptr;
  if (fold && !kCanFold) {
    throw Error(ErrorCode::kInternal,
                "CUDA_FLASH (sm_90a): a folded cache write reached an fp8 cache's kernels "
                "(can_fold_cache_update)");
  }
  const auto kernel =
      fold ? flash_wgmma_kernel<T, KV, C, kCanFold> : flash_wgmma_kernel<T, KV, C, false>;
  launch_kernel_ex(kernel, dim3(count, p.num_kv_heads), dim3(C::kThreads), C::kSmemBytes,
                   static_cast<cudaStream_t>(plan.stream), /*programmatic=*/true, p, items,
                   plan.partial_o, plan.partial_lse, plan.split_counters, fresh,
                   make_step_maps<C>(p, fresh));
  ATTNKIT_CUDA_CHECK_LAUNCH(flash_wgmma_kernel);
}

template <int D, typename T>
void launch_cache_dtype(const PagedAttentionParams& p, const CudaWorkItem* items, int count,
                        const DevicePlan& plan, const CacheUpdateParams& fresh) {
  switch (p.kv_dtype) {
    case ScalarType::kFp8E4M3:
      return launch_typed<D, T, Fp8E4M3>(p, items, count, plan, fresh);
    case ScalarType::kFp8E5M2:
      return launch_typed<D, T, Fp8E5M2>(p, items, count, plan, fresh);
    default:  // the compute dtype (launch_flash_attention checked)
      return launch_typed<D, T, T>(p, items, count, plan, fresh);
  }
}

template <int D>
void launch_head_size(const PagedAttentionParams& p, const CudaWorkItem* items, int count,
                      const DevicePlan& plan, const CacheUpdateParams& fresh) {
  if (p.q_dtype == ScalarType::kFloat16) {
    launch_cache_dtype<D, __half>(p, items, count, plan, fresh);
  } else {
    launch_cache_dtype<D, __nv_bfloat16>(p, items, count, plan, fresh);
  }
}

}  // namespace

bool flash_wgmma_enabled() {
  static const bool enabled = [] {
    if (option_switch(Option::kCudaFlashWgmma) == false) return false;
    int device = 0, major = 0, minor = 0;
    ATTNKIT_CUDA_CHECK(cudaGetDevice(&device));
    ATTNKIT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    ATTNKIT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
    if (major != 9 || minor != 0) return false;
    // The sm_90a image must load on this device (it does on every 9.0 device; asked
    // rather than assumed).
    cudaFuncAttributes attributes{};
    const cudaError_t status = cudaFuncGetAttributes(
        &attributes,
        flash_wgmma_kernel<__nv_bfloat16, __nv_bfloat16, WgmmaTiles<128, false>::type, false>);
    if (status != cudaSuccess) {
      (void)cudaGetLastError();
      return false;
    }
    return true;
  }();
  return enabled;
}

int flash_wgmma_tma_box_rows(const PagedAttentionParams& p) {
  // The encoder needs the device's context current on this thread, which a launch has by
  // then and a bare query may not.
  int device = 0;
  ATTNKIT_CUDA_CHECK(cudaGetDevice(&device));
  ATTNKIT_CUDA_CHECK(cudaSetDevice(device));
  if (p.kv_dtype == ScalarType::kFp8E4M3 || p.kv_dtype == ScalarType::kFp8E5M2) return 0;
  switch (p.head_size) {
    case 64:
      return make_kv_maps<WgmmaTiles<64, false>::type>(p).box_rows;
    case 128:
      return make_kv_maps<WgmmaTiles<128, false>::type>(p).box_rows;
    case 256:
      return make_kv_maps<WgmmaTiles<256, false>::type>(p).box_rows;
    default:
      return 0;
  }
}

void launch_flash_wgmma_items(const PagedAttentionParams& p, const CudaWorkItem* items, int count,
                              const DevicePlan& plan, const CacheUpdateParams& fresh_kv) {
  if (count == 0 && !plan.load_only) return;
  switch (p.head_size) {
    case 64:
      launch_head_size<64>(p, items, count, plan, fresh_kv);
      break;
    case 128:
      launch_head_size<128>(p, items, count, plan, fresh_kv);
      break;
    case 256:
      launch_head_size<256>(p, items, count, plan, fresh_kv);
      break;
    default:
      throw Error(ErrorCode::kUnsupported, "CUDA_FLASH (sm_90a): head_size " +
                                               std::to_string(p.head_size) +
                                               " not supported (supported: 64, 128, 256)");
  }
}

}  // namespace attnkit::cuda
