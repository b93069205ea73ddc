#include "attnkit/bench/scalar_baseline.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "attnkit/core/numeric.h"
#include "attnkit/kernels/mask.h"
#include "bench_support/step_inputs.h"

namespace attnkit::bench {
namespace {

using Clock = std::chrono::steady_clock;

// The straightforward implementation the benchmark compares against: one query and head
// at a time, scalar loops, scores materialised, two-pass softmax.
template <class Load>
void scalar_attention(const BenchShape& s, const StepInputs& in, const AlignedBytes& kc,
                      const AlignedBytes& vc, Load load, std::vector<float>& out) {
  const int H = s.num_heads, KV = s.num_kv_heads, d = s.head_size, bs = s.block_size;
  const int group = H / KV;
  std::vector<float> q(static_cast<size_t>(d)), score;
  for (int r = 0; r < in.common.num_reqs; ++r) {
    const int q_len = s.q_lens[static_cast<size_t>(r)], kv_len = s.kv_lens[static_cast<size_t>(r)];
    score.resize(static_cast<size_t>(kv_len));
    for (int j = 0; j < q_len; ++j) {
      const int t = in.common.query_start_loc[static_cast<size_t>(r)] + j;
      const KeySpan keys =
          visible_keys(MaskRule{.causal = s.causal}, query_position(q_len, kv_len, j), kv_len);
      for (int h = 0; h < H; ++h) {
        const int kvh = h / group;
        for (int x = 0; x < d; ++x)
          q[static_cast<size_t>(x)] =
              load_as_float(in.q.data(), in.dt, (int64_t{t} * H + h) * d + x);
        float m = -INFINITY;
        for (int k = keys.begin; k < keys.end; ++k) {
          const int64_t blk =
              in.common.block_table[static_cast<size_t>(r) * in.common.max_blocks_per_req +
                                    static_cast<size_t>(k / bs)];
          const int64_t base = ((blk * bs + k % bs) * KV + kvh) * d;
          float dot = 0.0f;
          for (int x = 0; x < d; ++x) dot += q[static_cast<size_t>(x)] * load(kc, base + x);
          score[static_cast<size_t>(k)] = dot * in.layer.scale;
          m = std::max(m, score[static_cast<size_t>(k)]);
        }
        float denom =
            in.layer.sinks.empty() ? 0.0f : std::exp(in.layer.sinks[static_cast<size_t>(h)] - m);
        float* o = &out[(static_cast<size_t>(t) * H + h) * d];
        std::fill(o, o + d, 0.0f);
        for (int k = keys.begin; k < keys.end; ++k) {
          const float w = std::exp(score[static_cast<size_t>(k)] - m);
          denom += w;
          const int64_t blk =
              in.common.block_table[static_cast<size_t>(r) * in.common.max_blocks_per_req +
                                    static_cast<size_t>(k / bs)];
          const int64_t base = ((blk * bs + k % bs) * KV + kvh) * d;
          for (int x = 0; x < d; ++x) o[x] += w * load(vc, base + x);
        }
        for (int x = 0; x < d; ++x) o[x] /= denom;
      }
    }
  }
}

}  // namespace

Timing time_scalar_baseline(const BenchShape& shape, const TimingOptions& options,
                            double max_flops) {
  const bool sample = bench_work(shape).flops > max_flops && shape.num_kv_heads > 1;
  const BenchShape s = sample ? one_kv_head(shape) : shape;
  StepInputs in(s, KvLayout::kNHD, true, !options.cache_resident);
  std::vector<float> out(static_cast<size_t>(in.common.num_actual_tokens) * s.num_heads *
                         s.head_size);
  const size_t layers = in.k_layers.size();
  size_t next = 0;
  auto run = [&] {
    const size_t l = next++ % layers;
    if (in.kt == ScalarType::kBFloat16) {
      scalar_attention(
          s, in, in.k_layers[l], in.v_layers[l],
          [](const AlignedBytes& b, int64_t i) {
            return bf16_bits_to_float(reinterpret_cast<const uint16_t*>(b.data())[i]);
          },
          out);
    } else {
      const ScalarType kt = in.kt;
      const float ks = in.layer.k_scale;
      scalar_attention(
          s, in, in.k_layers[l], in.v_layers[l],
          [kt, ks](const AlignedBytes& b, int64_t i) {
            return load_as_float(b.data(), kt, i) * ks;
          },
          out);
    }
  };
  for (int i = 0; i < std::min(options.warmup, 1); ++i) run();
  std::vector<double> us;
  const int repeats = std::max(1, std::min(options.repeats, 3));
  for (int i = 0; i < repeats; ++i) {
    const auto t0 = Clock::now();
    run();
    us.push_back(std::chrono::duration<double>(Clock::now() - t0).count() * 1e6);
  }
  const double scale = sample ? shape.num_kv_heads : 1.0;
  Timing t;
  t.median_us = median(us) * scale;
  t.min_us = *std::min_element(us.begin(), us.end()) * scale;
  t.repeats = repeats;
  t.layers = static_cast<int>(layers);
  return t;
}

}  // namespace attnkit::bench
