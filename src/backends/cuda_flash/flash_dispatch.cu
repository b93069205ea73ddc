// CUDA_FLASH entry point: picks the head-size instance (split-KV partials are merged by
// the kernel itself, see flash_kernel.cuh).
#include <numeric>
#include <string>

#include "backends/cuda_flash/flash_launch.cuh"

namespace attnkit::cuda {

namespace {

// Split-KV pieces are whole key tiles of every configuration that may run them: 64 keys
// (the 16-bit decode tiles, 32 or 64, and the prefill tiles) or a multiple of a larger tile.
constexpr int kSplitKeyMultiple = 64;

// The planner's numbers for head size D and this cache: those of the decode configuration
// launch_flash_head_size_typed runs (FlashSmallKvConfig), so fp8 caches follow theirs.
template <int D>
KernelGeometry small_geometry(bool fp8_cache) {
  using Same = typename FlashSmallKvConfig<D, __nv_bfloat16>::type;
  using Fp8 = typename FlashSmallKvConfig<D, Fp8E4M3>::type;
  using Fp8E5 = typename FlashSmallKvConfig<D, Fp8E5M2>::type;
  static_assert(Fp8::BN == Fp8E5::BN && Fp8::kMinCtas == Fp8E5::kMinCtas,
                "e4m3 and e5m2 caches plan alike");
  static_assert(Same::kRows == Fp8::kRows, "one small-row count per head size");
  KernelGeometry g;
  g.small_rows = Same::kRows;
  g.kv_tile = std::lcm(kSplitKeyMultiple, fp8_cache ? Fp8::BN : Same::BN);
  g.small_ctas_per_sm = fp8_cache ? Fp8::kMinCtas : Same::kMinCtas;
  return g;
}

}  // namespace

KernelGeometry flash_geometry(int head_size, bool fp8_cache) {
  KernelGeometry g = head_size == 64    ? small_geometry<64>(fp8_cache)
                     : head_size == 256 ? small_geometry<256>(fp8_cache)
                                        : small_geometry<128>(fp8_cache);
  g.large_rows = head_size == 64    ? FlashLargeConfig<64>::type::kRows
                 : head_size == 256 ? FlashLargeConfig<256>::type::kRows
                                    : FlashLargeConfig<128>::type::kRows;
#if ATTNKIT_CUDA_SM90A
  if (flash_wgmma_enabled()) g.large_rows = kFlashWgmmaRows;
#endif
  return g;
}

bool flash_hopper_prefill() {
#if ATTNKIT_CUDA_SM90A
  return flash_wgmma_enabled();
#else
  return false;
#endif
}

bool can_fold_cache_update(const CacheUpdateParams& u, const PagedAttentionParams& p,
                           const DevicePlan& plan, bool hopper_prefill) {
  // The kernels copy 16-byte rows of the compute dtype: no conversion, no scale. New keys
  // are the last q_len positions of each request only for causal self-attention. The
  // Hopper prefill kernels also copy the step's keys from the inputs (by the copy engine
  // or cp.async), which needs 16-byte aligned rows.
  const auto aligned = [](const void* ptr, int64_t token_stride, int64_t head_stride) {
    return reinterpret_cast<uintptr_t>(ptr) % 16 == 0 && token_stride % 8 == 0 &&
           head_stride % 8 == 0;
  };
  const bool large_fold =
      plan.num_large == 0 || (ATTNKIT_FLASH_FOLD_PREFILL_WRITE && hopper_prefill &&
                              aligned(u.key, u.key_token_stride, u.key_head_stride) &&
                              aligned(u.value, u.value_token_stride, u.value_head_stride));
  return p.causal && large_fold && plan.num_small + plan.num_large > 0 && u.value != nullptr &&
         u.src_dtype == p.q_dtype && u.kv_dtype == p.q_dtype && u.k_scale == 1.0f &&
         u.v_scale == 1.0f && u.num_kv_heads == p.num_kv_heads && u.head_size == p.head_size &&
         u.head_size_v == p.head_size;
}

void launch_flash_attention(const PagedAttentionParams& p, const DevicePlan& plan,
                            const FlashLaunchOptions& options) {
  if (p.q_dtype != ScalarType::kFloat16 && p.q_dtype != ScalarType::kBFloat16) {
    throw Error(ErrorCode::kUnsupported, "CUDA_FLASH: dtype " + std::string(to_string(p.q_dtype)) +
                                             " not supported (supported: float16, bfloat16)");
  }
  const bool fp8_cache = p.kv_dtype == ScalarType::kFp8E4M3 || p.kv_dtype == ScalarType::kFp8E5M2;
  if ((p.kv_dtype != p.q_dtype && !fp8_cache) || p.head_size != p.head_size_v) {
    throw Error(ErrorCode::kUnsupported,
                "CUDA_FLASH needs the KV cache in the compute dtype or fp8 (e4m3, e5m2), and "
                "head_size_v == head_size");
  }
  switch (p.head_size) {
    case 64:
      launch_flash_d64(p, plan, options);
      break;
    case 128:
      launch_flash_d128(p, plan, options);
      break;
    case 256:
      launch_flash_d256(p, plan, options);
      break;
    default:
      throw Error(ErrorCode::kUnsupported, "CUDA_FLASH: head_size " + std::to_string(p.head_size) +
                                               " not supported " +
                                               "(supported: " + std::to_string(kFlashHeadSizes[0]) +
                                               ", " + std::to_string(kFlashHeadSizes[1]) + ", " +
                                               std::to_string(kFlashHeadSizes[2]) + ")");
  }
  static_assert(kFlashHeadSizes == std::array<int, 3>{64, 128, 256},
                "the cases above are the instances of kFlashHeadSizes");
  // Split-KV partials are merged inside the attention kernel (last split of each group).
}

}  // namespace attnkit::cuda
