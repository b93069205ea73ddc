// Checked mode's scan after the kernels: which requests' query, fresh K/V or output rows
// hold NaN/inf (forward_check.h), and the error that names them.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "attnkit/backend/forward_check.h"

namespace attnkit {
namespace {

bool non_finite(const void* base, ScalarType dtype, int64_t index) {
  switch (dtype) {
    case ScalarType::kFloat32:
      return !std::isfinite(static_cast<const float*>(base)[index]);
    case ScalarType::kFloat16:  // exponent all ones: inf or NaN
      return (static_cast<const uint16_t*>(base)[index] & 0x7c00u) == 0x7c00u;
    case ScalarType::kBFloat16:
      return (static_cast<const uint16_t*>(base)[index] & 0x7f80u) == 0x7f80u;
    default:
      return false;  // outputs are never fp8
  }
}

}  // namespace

std::vector<NonFiniteRows> find_non_finite_rows(const TensorView& tensor,
                                                const CommonAttentionMetadata& common,
                                                const char* name) {
  std::vector<NonFiniteRows> found;
  const bool three_d = tensor.ndim == 3;
  const int64_t heads = three_d ? tensor.size(1) : 1, dim = tensor.size(tensor.ndim - 1);
  const int64_t head_stride = three_d ? tensor.stride(1) : 0;
  for (int i = 0; i < common.num_reqs; ++i) {
    NonFiniteRows rows;
    rows.request = i;
    rows.tensor = name;
    const int end = common.query_start_loc[static_cast<size_t>(i) + 1];
    for (int t = common.query_start_loc[static_cast<size_t>(i)]; t < end; ++t) {
      bool row_bad = false;
      for (int64_t h = 0; h < heads && !row_bad; ++h) {
        const int64_t base = t * tensor.stride(0) + h * head_stride;
        for (int64_t d = 0; d < dim && !row_bad; ++d) {
          row_bad = non_finite(tensor.data, tensor.dtype, base + d);
          if (row_bad && rows.num_rows == 0) {
            rows.first_row = t;
            rows.head = static_cast<int>(h);
            rows.dim = static_cast<int>(d);
          }
        }
      }
      if (row_bad) ++rows.num_rows;
    }
    if (rows.num_rows > 0) found.push_back(rows);
  }
  return found;
}

std::vector<NonFiniteRows> find_non_finite(const ForwardArgs& a) {
  std::vector<NonFiniteRows> found;
  auto scan = [&](const TensorView& t, const char* name) {
    if (t.empty() || t.device.type != DeviceType::kCpu) return;
    for (const NonFiniteRows& r : find_non_finite_rows(t, a.common, name)) found.push_back(r);
  };
  scan(a.query, "query");
  // Fresh K/V rows are attributed to requests when they are the step's tokens (not the
  // encoder rows of cross attention, nor rows a caller writes beyond the step's tokens).
  const bool kv_rows_are_tokens =
      !uses_paged_cache(a.layer) ||
      (a.layer.attn_type == AttentionType::kDecoder &&
       a.common.slot_mapping.size() == static_cast<size_t>(a.common.num_actual_tokens));
  if (kv_rows_are_tokens) {
    scan(a.key, "key");
    scan(a.value, "value");
  }
  scan(a.output, "output");
  std::stable_sort(found.begin(), found.end(), [](const NonFiniteRows& x, const NonFiniteRows& y) {
    return x.request < y.request;
  });
  return found;
}

int count_requests(const std::vector<NonFiniteRows>& rows) {
  int count = 0;
  for (size_t k = 0; k < rows.size(); ++k) {
    if (k == 0 || rows[k].request != rows[k - 1].request) ++count;
  }
  return count;
}

std::string describe_non_finite(const std::vector<NonFiniteRows>& rows) {
  std::string list;
  for (const NonFiniteRows& r : rows) {
    list += fmt::format("{}request {} {}: {} rows (first: row {} head {} dim {})",
                        list.empty() ? "" : "; ", r.request, r.tensor, r.num_rows, r.first_row,
                        r.head, r.dim);
  }
  return list;
}

void check_forward_outputs(const ForwardArgs& a, const ForwardCheckOptions& o) {
  if (!checked_mode(a.layer)) return;
  std::vector<NonFiniteRows> bad = find_non_finite(a);
  if (bad.empty()) return;
  const std::string message = fmt::format(
      "{}: NaN/inf in layer {} for {} of {} requests (the other requests' outputs are complete "
      "and unaffected): {}",
      o.backend, a.layer.layer_index, count_requests(bad), a.common.num_reqs,
      describe_non_finite(bad));
  throw NonFiniteOutputError(message, std::move(bad));
}

}  // namespace attnkit
