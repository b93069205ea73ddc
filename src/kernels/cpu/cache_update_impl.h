#pragma once
// The cache-update kernel (slot-mapping write), compiled per ISA like flash_kernel_impl.h:
// for each token t with slot_mapping[t] >= 0 and each KV head h,
//   k_cache[slot / block_size, slot % block_size, h, :] = quantize(key[t, h, :] / k_scale)
// (likewise for values). Conversions to fp32/fp16/bf16 are vectorised; fp8 quantisation
// goes element-wise through attnkit/core/numeric.h so it matches every other backend bit
// for bit.

// Requires `Ops` and row_io.h's helpers in the including namespace.

template <class Src, class Dst>
void write_row(const void* src, void* dst, int n, float scale) {
  constexpr int L = Ops::kLanes;
  const typename Ops::V vscale = Ops::set1(scale);
  for (int c = 0; c < n; c += L) {
    typename Ops::V v = Ops::load_f32(Src{}, typed<Src>(src) + c);
    if (scale != 1.0f) v = Ops::div(v, vscale);
    if constexpr (std::is_same_v<Dst, attnkit::cpu::KvE4m3> ||
                  std::is_same_v<Dst, attnkit::cpu::KvE5m2>) {
      float tmp[L];
      Ops::store(tmp, v);
      auto* out = static_cast<uint8_t*>(dst) + c;
      for (int i = 0; i < L; ++i) {
        out[i] = std::is_same_v<Dst, attnkit::cpu::KvE4m3> ? attnkit::float_to_fp8_e4m3(tmp[i])
                                                           : attnkit::float_to_fp8_e5m2(tmp[i]);
      }
    } else {
      Ops::store_as(Dst{}, static_cast<typename Dst::Storage*>(dst) + c, v);
    }
  }
}

template <class Src, class Dst>
void cache_update_typed(const attnkit::CacheUpdateParams& p) {
  const int64_t ssize = element_size(p.src_dtype);
  const int64_t dsize = element_size(p.kv_dtype);
  const bool has_value = p.value != nullptr && p.v_cache != nullptr;
  // Parallel only when there is enough to write to pay for waking the threads.
  const int64_t bytes =
      int64_t{p.num_tokens} * p.num_kv_heads * (p.head_size + p.head_size_v) * ssize;
#pragma omp parallel for schedule(static) if (bytes > (1 << 20))
  for (int t = 0; t < p.num_tokens; ++t) {
    const int64_t slot = p.slot_mapping[t];
    if (slot < 0) continue;
    const int64_t blk = slot / p.block_size;
    const int64_t off = slot % p.block_size;
    for (int h = 0; h < p.num_kv_heads; ++h) {
      const char* ks = static_cast<const char*>(p.key) +
                       (t * p.key_token_stride + h * p.key_head_stride) * ssize;
      char* kd = static_cast<char*>(p.k_cache) +
                 (blk * p.k_block_stride + off * p.k_token_stride + h * p.k_head_stride) * dsize;
      write_row<Src, Dst>(ks, kd, p.head_size, p.k_scale);
      if (has_value) {
        const char* vs = static_cast<const char*>(p.value) +
                         (t * p.value_token_stride + h * p.value_head_stride) * ssize;
        char* vd = static_cast<char*>(p.v_cache) +
                   (blk * p.v_block_stride + off * p.v_token_stride + h * p.v_head_stride) * dsize;
        write_row<Src, Dst>(vs, vd, p.head_size_v, p.v_scale);
      }
    }
  }
}

template <class Src>
void cache_update_from(const attnkit::CacheUpdateParams& p) {
  using attnkit::ScalarType;
  using namespace attnkit::cpu;
  switch (p.kv_dtype) {
    case ScalarType::kFloat32:
      return cache_update_typed<Src, KvF32>(p);
    case ScalarType::kFloat16:
      return cache_update_typed<Src, KvF16>(p);
    case ScalarType::kBFloat16:
      return cache_update_typed<Src, KvBf16>(p);
    case ScalarType::kFp8E4M3:
      return cache_update_typed<Src, KvE4m3>(p);
    default:
      return cache_update_typed<Src, KvE5m2>(p);
  }
}

inline void run_cache_update(const attnkit::CacheUpdateParams& p) {
  using attnkit::ScalarType;
  using namespace attnkit::cpu;
  switch (p.src_dtype) {
    case ScalarType::kFloat16:
      return cache_update_from<KvF16>(p);
    case ScalarType::kBFloat16:
      return cache_update_from<KvBf16>(p);
    default:
      return cache_update_from<KvF32>(p);
  }
}
