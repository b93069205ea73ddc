#pragma once
// The properties every recurrent-state op of kernels/cpu/state_update.h is tested for, written
// once over a "case" (one layer's params, weights and one sequence's inputs):
//   - chunking: one call == chunks of 1, 3, 7, rest == 2, 5, rest == token by token, all
//     continuing from the state, for the outputs and the final states;
//   - the state matters: restarting from a zero state mid-sequence changes the outputs (so the
//     chunking check could fail);
//   - recurrent == dense (outputs and final states).
// A case provides T, out_width, sizes(), step(t0, n, out, conv, rec) running tokens
// [t0, t0 + n) on the given states, dense(out, conv, rec) and name.

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/state_update.h"

namespace attnkit::state::testing {

// Chunked vs whole: each token's result is a function of (float32 state, its inputs), so
// the split is bitwise neutral by design; 1e-6 leaves room only for a compiler contracting
// differently (never seen).
inline constexpr double kChunkTol = 1e-6;
// Recurrent (float32 state rounded per token, double inside a token) vs dense (all double):
// max |diff| <= kDenseTol * max |dense| (measured: at most 1.1e-7 over these cases).
inline constexpr double kDenseTol = 1e-6;
// Restarting from zero mid-sequence must move the outputs by at least this (relative).
inline constexpr double kStateMattersMin = 1e-3;

// n values with magnitudes in [lo, hi] and random signs: never zero.
inline std::vector<float> signed_values(std::mt19937& rng, int64_t n, float lo, float hi) {
  std::uniform_real_distribution<float> mag(lo, hi);
  std::bernoulli_distribution neg(0.5);
  std::vector<float> v(n);
  for (float& x : v) x = neg(rng) ? -mag(rng) : mag(rng);
  return v;
}

// n values uniform in [lo, hi] (a range that excludes 0).
inline std::vector<float> uniform_values(std::mt19937& rng, int64_t n, float lo, float hi) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// max |got - want| / max |want| (0 when both are empty or all zero).
inline double rel_err(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0.0, scale = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    diff = std::max(diff, std::abs(double{got[i]} - want[i]));
    scale = std::max(scale, std::abs(double{want[i]}));
  }
  if (scale == 0.0) return diff;
  return diff / scale;
}

struct Result {
  std::vector<float> out, conv, rec;
};

// Runs the case's sequence as consecutive calls of `chunks` tokens from a zero state.
// reset_between zeroes the states before every chunk (a broken continuation, on purpose).
template <class Case>
Result run_chunks(const Case& c, const std::vector<int>& chunks, bool reset_between = false) {
  const StateSizes s = c.sizes();
  Result r{std::vector<float>(int64_t{c.T} * c.out_width, 0.0f),
           std::vector<float>(s.conv_elems, 0.0f), std::vector<float>(s.recurrent_elems, 0.0f)};
  int t0 = 0;
  for (int n : chunks) {
    if (reset_between) {
      std::fill(r.conv.begin(), r.conv.end(), 0.0f);
      std::fill(r.rec.begin(), r.rec.end(), 0.0f);
    }
    c.step(t0, n, r.out.data() + int64_t{t0} * c.out_width, r.conv.data(), r.rec.data());
    t0 += n;
  }
  EXPECT_EQ(t0, c.T);
  return r;
}

template <class Case>
Result run_dense(const Case& c) {
  const StateSizes s = c.sizes();
  Result r{std::vector<float>(int64_t{c.T} * c.out_width, 0.0f),
           std::vector<float>(s.conv_elems, 0.0f), std::vector<float>(s.recurrent_elems, 0.0f)};
  c.dense(r.out.data(), r.conv.data(), r.rec.data());
  return r;
}

// `prefix` chunk sizes while tokens remain, then the rest.
inline std::vector<int> schedule(int T, std::vector<int> prefix) {
  std::vector<int> out;
  int left = T;
  for (int n : prefix) {
    if (left == 0) break;
    out.push_back(std::min(n, left));
    left -= out.back();
  }
  if (left > 0) out.push_back(left);
  return out;
}

inline std::vector<std::vector<int>> schedules(int T) {
  return {schedule(T, {1, 3, 7}), schedule(T, {2, 5}), std::vector<int>(T, 1),
          schedule(T, {T / 2})};
}

template <class Case>
void expect_chunking_neutral(const Case& c) {
  SCOPED_TRACE(c.name);
  const Result whole = run_chunks(c, {c.T});
  for (const std::vector<int>& chunks : schedules(c.T)) {
    SCOPED_TRACE("chunks of " + std::to_string(chunks.front()) + ", ... (" +
                 std::to_string(chunks.size()) + " calls)");
    const Result r = run_chunks(c, chunks);
    EXPECT_LE(rel_err(r.out, whole.out), kChunkTol);
    EXPECT_LE(rel_err(r.conv, whole.conv), kChunkTol);
    EXPECT_LE(rel_err(r.rec, whole.rec), kChunkTol);
  }
  const StateSizes s = c.sizes();
  if (c.T >= 2 && s.conv_elems + s.recurrent_elems > 0) {
    const Result broken = run_chunks(c, schedule(c.T, {c.T / 2}), /*reset_between=*/true);
    EXPECT_GT(rel_err(broken.out, whole.out), kStateMattersMin)
        << "a zeroed state mid-sequence changed nothing: the chunking check would not fail";
  }
}

template <class Case>
void expect_matches_dense(const Case& c) {
  SCOPED_TRACE(c.name);
  const Result rec = run_chunks(c, schedule(c.T, {1, 3, 7}));
  const Result dense = run_dense(c);
  EXPECT_LE(rel_err(rec.out, dense.out), kDenseTol) << "outputs";
  EXPECT_LE(rel_err(rec.conv, dense.conv), kDenseTol) << "final conv state";
  EXPECT_LE(rel_err(rec.rec, dense.rec), kDenseTol) << "final recurrent state";
}

inline double silu(double x) { return x / (1.0 + std::exp(-x)); }
inline double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
inline double softplus(double x) { return std::log1p(std::exp(x)); }

}  // namespace attnkit::state::testing
