// FastDivmod (kernels/cuda/fast_divmod.h), the block-size division of the CUDA loaders, on
// the host (the same code the kernels run, __umulhi and __clz replaced by their host
// equivalents): exact against `/` and `%` for every divisor up to 4096 and every divisor
// of a block size (powers of two up to 2^20) over dividends at the edges (0, multiples of
// the divisor and their neighbours, the top of [0, 2^31)) and random ones.

#include "kernels/cuda/fast_divmod.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace attnkit::cuda {
namespace {

void expect_exact(int divisor, const std::vector<int>& dividends) {
  const FastDivmod div(divisor);
  ASSERT_EQ(div.divisor(), static_cast<uint32_t>(divisor));
  for (int n : dividends) {
    const int q = div.quotient(n);
    ASSERT_EQ(q, n / divisor) << n << " / " << divisor;
    ASSERT_EQ(div.remainder(n, q), n % divisor) << n << " % " << divisor;
  }
}

std::vector<int> dividends_for(int divisor, std::mt19937& rng) {
  constexpr int64_t kMax = INT32_MAX;
  const int64_t d = divisor;
  std::vector<int64_t> edges = {0, 1, 2, d - 1, d, d + 1, kMax, kMax - 1, kMax - d};
  for (int64_t k = 2; k < 40; ++k) {  // multiples of the divisor and their neighbours
    edges.insert(edges.end(), {d * k - 1, d * k, d * k + 1});
  }
  const int64_t top_multiple = kMax / d * d;
  edges.insert(edges.end(), {top_multiple - 1, top_multiple});
  std::vector<int> n;
  for (int64_t v : edges) {
    if (v >= 0 && v <= kMax) n.push_back(static_cast<int>(v));
  }
  std::uniform_int_distribution<int> any(0, INT32_MAX), small(0, 1 << 20);
  for (int i = 0; i < 200; ++i) n.insert(n.end(), {any(rng), small(rng)});
  return n;
}

TEST(FastDivmod, ExactForEveryDivisorUpTo4096) {
  std::mt19937 rng(20261205);
  for (int d = 1; d <= 4096; ++d) expect_exact(d, dividends_for(d, rng));
}

TEST(FastDivmod, ExactForLargeAndPowerOfTwoDivisors) {
  std::mt19937 rng(7);
  std::vector<int> divisors;
  for (int s = 0; s <= 30; ++s) divisors.insert(divisors.end(), {1 << s, (1 << s) + 1});
  divisors.insert(divisors.end(), {INT32_MAX, INT32_MAX - 1, 1000003, 65537, 46341});
  for (int d : divisors) expect_exact(d, dividends_for(d, rng));
}

TEST(FastDivmod, ExactOverEveryDividendBelow2Pow20ForBlockSizes) {
  for (int d : {1, 5, 7, 16, 32, 64, 128, 256, 528}) {
    const FastDivmod div(d);
    for (int n = 0; n < (1 << 20); ++n) {
      const int q = div.quotient(n);
      ASSERT_EQ(q, n / d) << n << " / " << d;
      ASSERT_EQ(div.remainder(n, q), n % d) << n << " % " << d;
    }
  }
}

}  // namespace
}  // namespace attnkit::cuda
