#pragma once
// Division by a divisor that is fixed for a whole kernel (the cache's block size) without
// the integer division's instruction sequence: a signed 32-bit `/` or `%` by a run-time
// value compiles to about 20 instructions with a round trip through the reciprocal unit,
// and the CUDA_FLASH and CUDA_PAGED loaders did one or two per copied key row. Here a
// quotient is one multiply-high and one shift, the multiplier worked out once per thread
// (the round-up method of Granlund and Montgomery, as CUTLASS's FastDivmod does it).
// Exact for dividends in [0, 2^31) and divisors in [1, 2^31) (tests/kernels/cuda).

#include <bit>
#include <cstdint>

#include "attnkit/core/numeric.h"  // ATTNKIT_HOST_DEVICE

namespace attnkit::cuda {

class FastDivmod {
 public:
  // divisor >= 1.
  ATTNKIT_HOST_DEVICE explicit FastDivmod(int divisor) : divisor_(static_cast<uint32_t>(divisor)) {
    if (divisor_ == 1) return;  // quotient() passes the dividend through
    // ceil(log2(divisor)), then multiplier = ceil(2^(31 + that) / divisor) < 2^32.
    const uint32_t log2_up = 32u - static_cast<uint32_t>(count_leading_zeros(divisor_ - 1));
    const uint64_t two_p = uint64_t{1} << (31u + log2_up);
    multiplier_ = static_cast<uint32_t>((two_p + divisor_ - 1) / divisor_);
    shift_ = log2_up - 1;
  }

  ATTNKIT_HOST_DEVICE uint32_t divisor() const { return divisor_; }

  // n / divisor for 0 <= n < 2^31.
  ATTNKIT_HOST_DEVICE int quotient(int n) const {
    const uint32_t u = static_cast<uint32_t>(n);
    return static_cast<int>(divisor_ == 1 ? u : multiply_high(u, multiplier_) >> shift_);
  }

  // n % divisor for 0 <= n < 2^31, given q = quotient(n).
  ATTNKIT_HOST_DEVICE int remainder(int n, int q) const {
    return n - q * static_cast<int>(divisor_);
  }

 private:
  ATTNKIT_HOST_DEVICE static int count_leading_zeros(uint32_t x) {
#if defined(__CUDA_ARCH__)
    return __clz(static_cast<int>(x));
#else
    return std::countl_zero(x);
#endif
  }
  ATTNKIT_HOST_DEVICE static uint32_t multiply_high(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
    return __umulhi(a, b);
#else
    return static_cast<uint32_t>((uint64_t{a} * b) >> 32);
#endif
  }

  uint32_t divisor_;
  uint32_t multiplier_ = 0;
  uint32_t shift_ = 0;
};

}  // namespace attnkit::cuda
