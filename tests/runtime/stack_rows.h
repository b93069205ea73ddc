#pragma once
// Host rows for AttentionStack tests: q/k/v/out as fp32 [tokens, heads, width] tensors that
// own their storage.

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "attnkit/core/tensor.h"

namespace attnkit::testing {

struct Rows {
  std::vector<float> data;
  TensorView view;
};

// Fresh standard-normal values.
inline Rows random_rows(int64_t tokens, int64_t heads, int64_t width, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  Rows r;
  r.data.resize(static_cast<size_t>(tokens * heads * width));
  for (float& x : r.data) x = normal(rng);
  r.view = TensorView::contiguous(r.data.data(), ScalarType::kFloat32, {tokens, heads, width});
  return r;
}

// An output buffer filled with NaN, so that a row the stack does not write shows.
inline Rows output_rows(int64_t tokens, int64_t heads, int64_t width) {
  Rows r;
  r.data.assign(static_cast<size_t>(tokens * heads * width), std::nanf(""));
  r.view = TensorView::contiguous(r.data.data(), ScalarType::kFloat32, {tokens, heads, width});
  return r;
}

}  // namespace attnkit::testing
