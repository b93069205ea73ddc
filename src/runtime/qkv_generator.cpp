#include "attnkit/runtime/qkv_generator.h"

#include "attnkit/backend/state_params.h"
#include "attnkit/core/numeric.h"
#include "runtime/counter_hash.h"

namespace attnkit {
namespace {

// The part of the hash shared by one token's row of one head, so each element costs one
// more mixing round.
uint64_t row_key(uint64_t seed, QkvStream stream, TokenSource source, int layer, int request,
                 int position, int head) {
  const uint64_t tag = (static_cast<uint64_t>(stream) << 8) | static_cast<uint64_t>(source);
  return counter_hash({seed, tag, static_cast<uint64_t>(layer), static_cast<uint64_t>(request),
                       static_cast<uint64_t>(position), static_cast<uint64_t>(head)});
}

float element(uint64_t row, int dim, ScalarType type) {
  return round_trip(type, unit_float(splitmix64(row ^ static_cast<uint64_t>(dim))));
}

}  // namespace

float QkvGenerator::value(QkvStream stream, TokenSource source, int layer, int request,
                          int position, int head, int dim) const {
  return element(row_key(seed_, stream, source, layer, request, position, head), dim,
                 scalar_type_of(dtype_));
}

void QkvGenerator::fill_row(QkvStream stream, TokenSource source, int layer, int request,
                            int position, int heads, int dim, float* out) const {
  const ScalarType type = scalar_type_of(dtype_);
  for (int h = 0; h < heads; ++h) {
    const uint64_t row = row_key(seed_, stream, source, layer, request, position, h);
    for (int d = 0; d < dim; ++d) out[h * dim + d] = element(row, d, type);
  }
}

std::vector<float> QkvGenerator::sinks(int layer, int num_heads) const {
  std::vector<float> out(static_cast<size_t>(num_heads));
  for (int h = 0; h < num_heads; ++h) {
    const uint64_t hash =
        counter_hash({seed_, 0x51dcull, static_cast<uint64_t>(layer), static_cast<uint64_t>(h)});
    out[static_cast<size_t>(h)] = unit_float(hash) + 1.0f;
  }
  return out;
}

std::vector<float> QkvGenerator::state_params(int layer, const StateLayerDims& dims) const {
  std::vector<float> out;
  out.reserve(state_param_count(dims));
  uint64_t segment = 0;
  for (const StateParamSegment& s : state_param_layout(dims)) {
    for (size_t i = 0; i < s.count; ++i) {
      const uint64_t hash = counter_hash(
          {seed_, 0x57a7eull, static_cast<uint64_t>(layer), segment, static_cast<uint64_t>(i)});
      const double u = 0.5 * (static_cast<double>(unit_float(hash)) + 1.0);  // [0, 1)
      out.push_back(state_param_value(s, u));
    }
    ++segment;
  }
  return out;
}

TokenSource query_source(const AttentionLayerParams& layer) {
  return layer.attn_type == AttentionType::kEncoder ? TokenSource::kEncoder : TokenSource::kDecoder;
}

TokenSource key_source(const AttentionLayerParams& layer) {
  return layer.attn_type == AttentionType::kEncoder ||
                 layer.attn_type == AttentionType::kEncoderDecoder
             ? TokenSource::kEncoder
             : TokenSource::kDecoder;
}

}  // namespace attnkit
