#include "backends/cuda/cuda_capabilities.h"

#include <string>

namespace attnkit::cuda {
namespace {

BackendCapabilities common_capabilities() {
  BackendCapabilities caps;
  caps.platform = PlatformKind::kCuda;
  caps.min_compute_capability = 80;  // cp.async, bf16 mma and ldmatrix need sm_80
  caps.dtypes = {DType::kFloat16, DType::kBFloat16};
  caps.kernel_block_sizes = SizeRule::any();
  caps.preferred_block_size = 16;
  caps.attention_types = {AttentionType::kDecoder, AttentionType::kEncoder,
                          AttentionType::kEncoderOnly, AttentionType::kEncoderDecoder};
  caps.sliding_window = true;
  caps.chunked_local = true;
  caps.sinks = true;
  caps.soft_cap = true;
  caps.non_causal = true;
  // Split-KV partitioning depends on the whole batch, so results are not batch invariant.
  caps.batch_invariant = false;
  return caps;
}

}  // namespace

const BackendCapabilities& paged_capabilities() {
  static const BackendCapabilities caps = [] {
    BackendCapabilities c = common_capabilities();
    c.kv_cache_dtypes = {KvCacheDType::kFloat16, KvCacheDType::kBFloat16, KvCacheDType::kFp8E4M3,
                         KvCacheDType::kFp8E5M2};
    // 16-byte vector loads of 8 elements need head_size % 8 == 0; lanes own 8-element
    // chunks, at most 32 of them (256).
    c.head_sizes = SizeRule::multiple(16, 16, 256);
    return c;
  }();
  return caps;
}

const BackendCapabilities& flash_capabilities() {
  static const BackendCapabilities caps = [] {
    BackendCapabilities c = common_capabilities();
    c.kv_cache_dtypes = {KvCacheDType::kFloat16, KvCacheDType::kBFloat16};
    // One template instance per head size: the XOR swizzle of shared memory needs at least
    // 8 16-byte chunks per row (64) and the output accumulators must fit in registers.
    c.head_sizes = SizeRule::list({64, 128, 256});
    return c;
  }();
  return caps;
}

std::string flash_kv_dtype_reason(DType dtype, KvCacheDType kv_cache_dtype) {
  if (kv_cache_dtype == KvCacheDType::kAuto) return {};
  if (scalar_type_of(kv_cache_dtype, dtype) == scalar_type_of(dtype)) return {};
  return "kv_cache_dtype " + std::string(to_string(kv_cache_dtype)) + " differs from dtype " +
         std::string(to_string(dtype)) +
         " (CUDA_FLASH feeds the cache to the tensor cores: supported: auto or the compute "
         "dtype)";
}

}  // namespace attnkit::cuda
