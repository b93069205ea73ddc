#include "runtime/step_rows.h"

#include <cstring>

#include "attnkit/core/numeric.h"

namespace attnkit {

HostTensor generate_rows(const QkvGenerator& gen, QkvStream stream, TokenSource source, int layer,
                         std::span<const StepRow> rows, int heads, int dim) {
  const auto n = static_cast<int64_t>(rows.size());
  const ScalarType type = scalar_type_of(gen.dtype());
  HostTensor t(type, {n, heads, dim});
  const int64_t row_elems = int64_t{heads} * dim;
  std::vector<float> buffer(static_cast<size_t>(row_elems));
  for (int64_t r = 0; r < n; ++r) {
    const StepRow& row = rows[static_cast<size_t>(r)];
    gen.fill_row(stream, source, layer, row.request, row.position, heads, dim, buffer.data());
    if (type == ScalarType::kFloat32) {
      std::memcpy(t.data_as<float>() + r * row_elems, buffer.data(),
                  static_cast<size_t>(row_elems) * sizeof(float));
    } else {
      for (int64_t e = 0; e < row_elems; ++e) {
        store_from_float(t.data(), type, r * row_elems + e, buffer[static_cast<size_t>(e)]);
      }
    }
  }
  return t;
}

std::vector<float> read_row(const TensorView& output, int row) {
  const int64_t heads = output.size(1), dim = output.size(2);
  std::vector<float> out(static_cast<size_t>(heads * dim));
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t d = 0; d < dim; ++d) {
      const int64_t offset = row * output.stride(0) + h * output.stride(1) + d * output.stride(2);
      out[static_cast<size_t>(h * dim + d)] = load_as_float(output.data, output.dtype, offset);
    }
  }
  return out;
}

}  // namespace attnkit
