#pragma once
// Row loads, stores and conversions shared by the CPU kernels (flash, MLA, cache update),
// written once against an `Ops` SIMD interface (simd_<isa>.h): a per-ISA file includes this
// inside its target namespace, after its Ops (see target_begin.h), so each target gets its
// own copy.

#include <cstdint>
#include <cstring>
#include <limits>

#include "attnkit/core/enums.h"
#include "kernels/cpu/kv_tags.h"

// Requires `Ops` (the SIMD interface) declared in the including namespace.

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

template <class Tag>
const typename Tag::Storage* typed(const void* p) {
  return static_cast<const typename Tag::Storage*>(p);
}

// Converts n (a multiple of Ops::kLanes) elements of `type` at src to fp32 at dst.
inline void load_row_f32(attnkit::ScalarType type, const void* src, float* dst, int n) {
  using attnkit::ScalarType;
  using namespace attnkit::cpu;
  constexpr int L = Ops::kLanes;
  for (int c = 0; c < n; c += L) {
    switch (type) {
      case ScalarType::kFloat16:
        Ops::store(dst + c, Ops::load_f32(KvF16{}, typed<KvF16>(src) + c));
        break;
      case ScalarType::kBFloat16:
        Ops::store(dst + c, Ops::load_f32(KvBf16{}, typed<KvBf16>(src) + c));
        break;
      default:
        Ops::store(dst + c, Ops::load_f32(KvF32{}, typed<KvF32>(src) + c));
        break;
    }
  }
}

// Writes n fp32 values times `factor` as `type` (fp32, fp16 or bf16) at dst.
inline void store_row(attnkit::ScalarType type, const float* src, float factor, void* dst, int n) {
  using attnkit::ScalarType;
  using namespace attnkit::cpu;
  constexpr int L = Ops::kLanes;
  const typename Ops::V f = Ops::set1(factor);
  for (int c = 0; c < n; c += L) {
    const typename Ops::V v = Ops::mul(Ops::load(src + c), f);
    switch (type) {
      case ScalarType::kFloat16:
        Ops::store_as(KvF16{}, static_cast<uint16_t*>(dst) + c, v);
        break;
      case ScalarType::kBFloat16:
        Ops::store_as(KvBf16{}, static_cast<uint16_t*>(dst) + c, v);
        break;
      default:
        Ops::store_as(KvF32{}, static_cast<float*>(dst) + c, v);
        break;
    }
  }
}

// The split column order of Ops::load_bf16_split (AVX2): within each 16 columns the even
// ones, then the odd ones. A row of n (a multiple of 16) fp32 values put into that order in
// place, and back.
inline void to_split_order(float* row, int n) {
  for (int64_t c = 0; c < n; c += 16) {
    float natural[16];
    std::memcpy(natural, row + c, sizeof(natural));
    for (int64_t i = 0; i < 8; ++i) {
      row[c + i] = natural[2 * i];
      row[c + 8 + i] = natural[2 * i + 1];
    }
  }
}
inline void from_split_order(float* row, int n) {
  for (int64_t c = 0; c < n; c += 16) {
    float split[16];
    std::memcpy(split, row + c, sizeof(split));
    for (int64_t i = 0; i < 8; ++i) {
      row[c + 2 * i] = split[i];
      row[c + 2 * i + 1] = split[8 + i];
    }
  }
}

inline int64_t element_size(attnkit::ScalarType t) {
  switch (t) {
    case attnkit::ScalarType::kFloat32:
      return 4;
    case attnkit::ScalarType::kFloat16:
    case attnkit::ScalarType::kBFloat16:
      return 2;
    default:
      return 1;
  }
}
