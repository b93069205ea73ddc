// The visible-keys rule (attnkit/kernels/mask.h): the interval form, the per-key form and
// the union over a tile of rows agree, over every position of many random masks.

#include "attnkit/kernels/mask.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace attnkit {
namespace {

MaskRule random_mask(std::mt19937& rng) {
  std::uniform_int_distribution<int> coin(0, 1), window(1, 40), chunk(1, 24);
  MaskRule m;
  m.causal = coin(rng) == 1 || coin(rng) == 1;  // mostly causal
  if (m.causal && coin(rng) == 1) m.sliding_window = window(rng);
  if (m.causal && coin(rng) == 1) m.chunk_size = chunk(rng);
  return m;
}

TEST(Mask, IntervalHoldsExactlyTheVisibleKeys) {
  std::mt19937 rng(20261201);
  for (int trial = 0; trial < 400; ++trial) {
    const MaskRule m = random_mask(rng);
    const int kv_len = std::uniform_int_distribution<int>(0, 70)(rng);
    for (int pos = -3; pos < kv_len + 3; ++pos) {
      const KeySpan span = visible_keys(m, pos, kv_len);
      ASSERT_LE(span.begin, span.end);
      ASSERT_GE(span.begin, 0);
      ASSERT_LE(span.end, kv_len);
      for (int key = 0; key < kv_len; ++key) {
        ASSERT_EQ(span.contains(key), key_visible(m, pos, key))
            << "causal " << m.causal << " window " << m.sliding_window << " chunk " << m.chunk_size
            << " pos " << pos << " key " << key << " kv_len " << kv_len;
      }
    }
  }
}

TEST(Mask, KnownCases) {
  const MaskRule causal{true, 0, 0};
  EXPECT_EQ(visible_keys(causal, 4, 10).begin, 0);
  EXPECT_EQ(visible_keys(causal, 4, 10).end, 5);
  EXPECT_EQ(visible_keys(causal, 20, 10).end, 10);  // capped by kv_len
  const MaskRule window{true, 3, 0};
  EXPECT_EQ(visible_keys(window, 9, 10).begin, 7);  // keys 7, 8, 9
  EXPECT_EQ(visible_keys(window, 9, 10).size(), 3);
  const MaskRule chunk{true, 0, 4};
  EXPECT_EQ(visible_keys(chunk, 9, 10).begin, 8);  // chunk [8, 12)
  EXPECT_EQ(visible_keys(chunk, 9, 10).end, 10);
  const MaskRule full{false, 3, 4};  // non-causal: window and chunk do not apply
  EXPECT_EQ(visible_keys(full, 0, 10).size(), 10);
  EXPECT_TRUE(visible_keys(causal, 0, 0).empty());
  EXPECT_EQ(query_position(3, 10, 0), 7);  // the last 3 of 10 positions
}

TEST(Mask, RowsUnionCoversEveryRowAndNoMore) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 400; ++trial) {
    const MaskRule m = random_mask(rng);
    const int kv_len = std::uniform_int_distribution<int>(1, 70)(rng);
    const int first = std::uniform_int_distribution<int>(0, kv_len - 1)(rng);
    const int last = std::uniform_int_distribution<int>(first, kv_len - 1)(rng);
    const KeySpan rows = visible_keys_of_rows(m, first, last, kv_len);
    int lo = kv_len, hi = 0;
    for (int pos = first; pos <= last; ++pos) {
      const KeySpan span = visible_keys(m, pos, kv_len);
      if (span.empty()) continue;
      EXPECT_LE(rows.begin, span.begin);
      EXPECT_GE(rows.end, span.end);
      lo = std::min(lo, span.begin);
      hi = std::max(hi, span.end);
    }
    if (lo < hi) {  // tight: the ends are the extreme rows' ends
      EXPECT_EQ(rows.begin, lo);
      EXPECT_EQ(rows.end, hi);
    }
  }
}

}  // namespace
}  // namespace attnkit
