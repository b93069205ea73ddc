#pragma once
// Storage-type tags the per-ISA kernels are instantiated for. Each names the element type
// a row is stored as; the SIMD ops convert a tile of it to fp32 in registers.

#include <cstdint>

#include "attnkit/core/enums.h"

namespace attnkit::cpu {

struct KvF32 {
  using Storage = float;
  static constexpr ScalarType kType = ScalarType::kFloat32;
};
struct KvBf16 {
  using Storage = uint16_t;
  static constexpr ScalarType kType = ScalarType::kBFloat16;
};
struct KvF16 {
  using Storage = uint16_t;
  static constexpr ScalarType kType = ScalarType::kFloat16;
};
struct KvE4m3 {
  using Storage = uint8_t;
  static constexpr ScalarType kType = ScalarType::kFp8E4M3;
};
struct KvE5m2 {
  using Storage = uint8_t;
  static constexpr ScalarType kType = ScalarType::kFp8E5M2;
};

}  // namespace attnkit::cpu
