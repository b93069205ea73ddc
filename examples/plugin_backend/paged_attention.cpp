#include "paged_attention.h"

#include <attnkit/plugin_abi.h>
#include <math.h>
#include <string.h>

namespace example {
namespace {

// --- Scalar formats (round-to-nearest-even, like the host) -------------------------------

uint32_t float_bits(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u;
}

float bits_float(uint32_t u) {
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

float bf16_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

uint16_t float_to_bf16(float f) {
  uint32_t u = float_bits(f);
  if (isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

float half_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24
    const float magnitude = ldexpf(static_cast<float>(mantissa), -24);
    return sign ? -magnitude : magnitude;
  }
  if (exponent == 31) return bits_float(sign | 0x7f800000u | (mantissa << 13));
  return bits_float(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

uint16_t float_to_half(float f) {
  const uint32_t x = float_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) {  // inf, or nan (kept quiet)
    return static_cast<uint16_t>(sign | 0x7c00u | (magnitude > 0x7f800000u ? 0x200u : 0u));
  }
  // 65520 is halfway between 65504 (largest half, odd mantissa) and 2^16: ties go to inf.
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (magnitude < 0x38800000u) {  // below 2^-14: a half subnormal, units of 2^-24
    const int32_t exponent = static_cast<int32_t>(magnitude >> 23);
    if (exponent < 102) return static_cast<uint16_t>(sign);  // below 2^-25: rounds to 0
    const uint32_t mantissa = (magnitude & 0x7fffffu) | 0x800000u;
    const int32_t shift = 126 - exponent;  // 14..24
    uint32_t r = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (r & 1u))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t h = (magnitude >> 13) - (112u << 10);  // rebias the exponent from 127 to 15
  const uint32_t rest = magnitude & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

// Element access, specialised per type so the inner loops carry no type switch.
struct F32 {
  static float load(const void* p, int64_t i) { return static_cast<const float*>(p)[i]; }
  static void store(void* p, int64_t i, float v) { static_cast<float*>(p)[i] = v; }
};
struct F16 {
  static float load(const void* p, int64_t i) {
    return half_to_float(static_cast<const uint16_t*>(p)[i]);
  }
  static void store(void* p, int64_t i, float v) {
    static_cast<uint16_t*>(p)[i] = float_to_half(v);
  }
};
struct BF16 {
  static float load(const void* p, int64_t i) {
    return bf16_to_float(static_cast<const uint16_t*>(p)[i]);
  }
  static void store(void* p, int64_t i, float v) {
    static_cast<uint16_t*>(p)[i] = float_to_bf16(v);
  }
};

// Where key position `k` of request `request` lives: cache offset of (block, slot, head 0,
// dim 0), or -1 when the block table points outside the cache.
int64_t key_offset(const Batch& b, const PagedCache& c, int32_t request, int32_t k) {
  const int32_t block =
      b.block_table[static_cast<int64_t>(request) * b.block_table_stride + k / b.block_size];
  if (block < 0 || block >= c.num_blocks) return -1;
  return block * c.block_stride + static_cast<int64_t>(k % b.block_size) * c.slot_stride;
}

template <typename T>
int32_t write_cache_t(const Batch& b, const Shape& s, const Rows& key, const Rows& value,
                      const PagedCache& kc, const PagedCache& vc) {
  for (int32_t t = 0; t < b.num_tokens; ++t) {
    const int64_t slot = b.slot_mapping[t];
    if (slot < 0) continue;
    const int64_t block = slot / b.block_size;
    if (block >= kc.num_blocks || block >= vc.num_blocks) return t;
    const int64_t offset = slot % b.block_size;
    for (int32_t h = 0; h < s.num_kv_heads; ++h) {
      for (int32_t d = 0; d < s.head_size; ++d) {
        T::store(kc.data,
                 block * kc.block_stride + offset * kc.slot_stride + h * kc.head_stride +
                     d * kc.dim_stride,
                 T::load(key.data, t * key.row_stride + h * key.head_stride + d * key.dim_stride));
      }
      for (int32_t d = 0; d < s.head_size_v; ++d) {
        T::store(vc.data,
                 block * vc.block_stride + offset * vc.slot_stride + h * vc.head_stride +
                     d * vc.dim_stride,
                 T::load(value.data,
                         t * value.row_stride + h * value.head_stride + d * value.dim_stride));
      }
    }
  }
  return -1;
}

template <typename T>
int32_t attend_t(const Batch& b, const Shape& s, const Rows& query, const PagedCache& kc,
                 const PagedCache& vc, const Rows& out, float* scratch) {
  const int32_t group = s.num_heads / s.num_kv_heads;  // query heads per KV head (GQA)
  float* q = scratch;
  float* acc = q + s.head_size;
  float* scores = acc + s.head_size_v;
  for (int32_t t = 0; t < b.num_tokens; ++t) {
    const int32_t request = b.token_request[t];
    const int32_t position = b.token_position[t];
    // Visible keys: k <= position (causal), k > position - window (left sliding window).
    const int32_t last = position < b.seq_lens[request] - 1 ? position : b.seq_lens[request] - 1;
    int32_t first = 0;
    if (s.sliding_window > 0 && position - s.sliding_window + 1 > 0) {
      first = position - s.sliding_window + 1;
    }
    for (int32_t h = 0; h < s.num_heads; ++h) {
      const int32_t kv_head = h / group;
      for (int32_t d = 0; d < s.head_size; ++d) {
        q[d] = T::load(query.data,
                       t * query.row_stride + h * query.head_stride + d * query.dim_stride);
      }
      float max_score = -INFINITY;
      for (int32_t k = first; k <= last; ++k) {
        const int64_t base = key_offset(b, kc, request, k);
        if (base < 0) return t;
        const int64_t row = base + kv_head * kc.head_stride;
        float dot = 0.0f;
        for (int32_t d = 0; d < s.head_size; ++d)
          dot += q[d] * T::load(kc.data, row + d * kc.dim_stride);
        const float score = dot * s.scale;
        scores[k - first] = score;
        if (score > max_score) max_score = score;
      }
      for (int32_t d = 0; d < s.head_size_v; ++d) acc[d] = 0.0f;
      float denominator = 0.0f;
      for (int32_t k = first; k <= last; ++k) {
        // Softmax relative to the maximum, so exp() never overflows.
        const float weight = expf(scores[k - first] - max_score);
        denominator += weight;
        const int64_t row = key_offset(b, vc, request, k) + kv_head * vc.head_stride;
        for (int32_t d = 0; d < s.head_size_v; ++d)
          acc[d] += weight * T::load(vc.data, row + d * vc.dim_stride);
      }
      // A query that sees no key writes zeros (denominator 0).
      const float inverse = denominator > 0.0f ? 1.0f / denominator : 0.0f;
      for (int32_t d = 0; d < s.head_size_v; ++d) {
        T::store(out.data, t * out.row_stride + h * out.head_stride + d * out.dim_stride,
                 acc[d] * inverse);
      }
    }
  }
  return -1;
}

}  // namespace

int32_t write_cache(const Batch& b, const Shape& s, const Rows& key, const Rows& value,
                    const PagedCache& kc, const PagedCache& vc) {
  switch (key.scalar_type) {
    case ATTNKIT_SCALAR_FLOAT16:
      return write_cache_t<F16>(b, s, key, value, kc, vc);
    case ATTNKIT_SCALAR_BFLOAT16:
      return write_cache_t<BF16>(b, s, key, value, kc, vc);
    default:
      return write_cache_t<F32>(b, s, key, value, kc, vc);
  }
}

int64_t attend_scratch_floats(int32_t max_seq_len, const Shape& s) {
  return static_cast<int64_t>(max_seq_len) + s.head_size + s.head_size_v;
}

int32_t attend(const Batch& b, const Shape& s, const Rows& query, const PagedCache& kc,
               const PagedCache& vc, const Rows& out, float* scratch) {
  switch (query.scalar_type) {
    case ATTNKIT_SCALAR_FLOAT16:
      return attend_t<F16>(b, s, query, kc, vc, out, scratch);
    case ATTNKIT_SCALAR_BFLOAT16:
      return attend_t<BF16>(b, s, query, kc, vc, out, scratch);
    default:
      return attend_t<F32>(b, s, query, kc, vc, out, scratch);
  }
}

}  // namespace example
