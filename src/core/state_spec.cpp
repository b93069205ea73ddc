#include "attnkit/core/state_spec.h"

#include <fmt/format.h>

#include <string_view>

#include "attnkit/core/error.h"

namespace attnkit {
namespace {

size_t product(const std::vector<int>& shape) {
  if (shape.empty()) return 0;
  size_t n = 1;
  for (int d : shape) n *= static_cast<size_t>(d);
  return n;
}

[[noreturn]] void bad(const StateLayerDims& d, std::string_view what, int value,
                      std::string_view bound) {
  throw Error(ErrorCode::kInvalidArgument, fmt::format("{} state: {} is {}, but it must be {}",
                                                       to_string(d.type), what, value, bound));
}

void require_positive(const StateLayerDims& d, std::string_view what, int value) {
  if (value <= 0) bad(d, what, value, "> 0");
}

bool has_conv(StateLayerType t) { return t != StateLayerType::kLinearAttention; }

}  // namespace

int StateLayerDims::conv_channels() const {
  switch (type) {
    case StateLayerType::kMamba1:
    case StateLayerType::kShortConv:
    case StateLayerType::kRgLru:
      return inner_size;
    case StateLayerType::kMamba2:
      return num_heads * head_dim + 2 * n_groups * state_size;
    case StateLayerType::kGatedDeltaNet:
    case StateLayerType::kKimiDeltaAttention:
      return 2 * num_k_heads * head_k_dim + num_heads * head_dim;
    case StateLayerType::kLinearAttention:
      return 0;
  }
  return 0;
}

int StateLayerDims::input_width() const {
  switch (type) {
    case StateLayerType::kMamba1:
      return 2 * inner_size;  // x, z
    case StateLayerType::kMamba2:
      return conv_channels() + num_heads;  // xBC, dt
    case StateLayerType::kGatedDeltaNet:
      return conv_channels() + 2 * num_heads;  // qkv, a, b
    case StateLayerType::kKimiDeltaAttention:
      return conv_channels() + num_heads * head_k_dim + num_heads;  // qkv, g, b
    case StateLayerType::kShortConv:
      return 3 * inner_size;  // B, C, x
    case StateLayerType::kLinearAttention:
      return 3 * num_heads * head_dim;  // q, k, v
    case StateLayerType::kRgLru:
      return inner_size;  // x
  }
  return 0;
}

int StateLayerDims::output_width() const {
  switch (type) {
    case StateLayerType::kMamba1:
    case StateLayerType::kShortConv:
    case StateLayerType::kRgLru:
      return inner_size;
    case StateLayerType::kMamba2:
    case StateLayerType::kGatedDeltaNet:
    case StateLayerType::kKimiDeltaAttention:
    case StateLayerType::kLinearAttention:
      return num_heads * head_dim;
  }
  return 0;
}

std::vector<int> StateLayerDims::conv_shape() const {
  if (!has_conv(type) || conv_kernel <= 1) return {};
  return {conv_channels(), conv_kernel - 1};
}

std::vector<int> StateLayerDims::recurrent_shape() const {
  switch (type) {
    case StateLayerType::kMamba1:
      return {inner_size, state_size};
    case StateLayerType::kMamba2:
      return {num_heads, head_dim, state_size};
    case StateLayerType::kGatedDeltaNet:
    case StateLayerType::kKimiDeltaAttention:
      return {num_heads, head_k_dim, head_dim};
    case StateLayerType::kShortConv:
      return {};
    case StateLayerType::kLinearAttention:
      return {num_heads, head_dim, head_dim};
    case StateLayerType::kRgLru:
      return {inner_size};
  }
  return {};
}

size_t StateLayerDims::conv_elems() const { return product(conv_shape()); }
size_t StateLayerDims::recurrent_elems() const { return product(recurrent_shape()); }

size_t StateLayerDims::recurrent_offset() const {
  constexpr size_t kAlign = 16;
  return (conv_elems() * size_of(conv_dtype) + kAlign - 1) / kAlign * kAlign;
}

size_t StateLayerDims::bytes() const {
  return recurrent_offset() + recurrent_elems() * size_of(recurrent_dtype);
}

std::string StateLayerDims::describe() const {
  std::string s(to_string(type));
  switch (type) {
    case StateLayerType::kMamba1:
      s += fmt::format(" inner {} state {} dt_rank {}", inner_size, state_size, dt_rank);
      break;
    case StateLayerType::kMamba2:
      s += fmt::format(" {}x{} heads, {} groups, state {}", num_heads, head_dim, n_groups,
                       state_size);
      break;
    case StateLayerType::kGatedDeltaNet:
    case StateLayerType::kKimiDeltaAttention:
      s += fmt::format(" {}x{} keys, {}x{} values", num_k_heads, head_k_dim, num_heads, head_dim);
      break;
    case StateLayerType::kShortConv:
      s += fmt::format(" hidden {}", inner_size);
      break;
    case StateLayerType::kLinearAttention:
      s += fmt::format(" {}x{} heads", num_heads, head_dim);
      break;
    case StateLayerType::kRgLru:
      s += fmt::format(" width {}, {} blocks", inner_size, num_heads);
      break;
  }
  if (conv_kernel > 0) s += fmt::format(", conv {}", conv_kernel);
  return s;
}

void validate_state_dims(const StateLayerDims& d) {
  switch (d.type) {
    case StateLayerType::kMamba1:
      require_positive(d, "inner_size", d.inner_size);
      require_positive(d, "state_size", d.state_size);
      require_positive(d, "dt_rank", d.dt_rank);
      break;
    case StateLayerType::kMamba2:
      require_positive(d, "num_heads", d.num_heads);
      require_positive(d, "head_dim", d.head_dim);
      require_positive(d, "n_groups", d.n_groups);
      require_positive(d, "state_size", d.state_size);
      if (d.num_heads % d.n_groups != 0) {
        bad(d, "n_groups", d.n_groups, fmt::format("a divisor of num_heads ({})", d.num_heads));
      }
      break;
    case StateLayerType::kGatedDeltaNet:
    case StateLayerType::kKimiDeltaAttention:
      require_positive(d, "num_k_heads", d.num_k_heads);
      require_positive(d, "head_k_dim", d.head_k_dim);
      require_positive(d, "num_heads (value heads)", d.num_heads);
      require_positive(d, "head_dim (value head size)", d.head_dim);
      if (d.num_heads % d.num_k_heads != 0) {
        bad(d, "num_heads (value heads)", d.num_heads,
            fmt::format("a multiple of num_k_heads ({})", d.num_k_heads));
      }
      break;
    case StateLayerType::kShortConv:
      require_positive(d, "inner_size", d.inner_size);
      break;
    case StateLayerType::kLinearAttention:
      require_positive(d, "num_heads", d.num_heads);
      require_positive(d, "head_dim", d.head_dim);
      if (d.conv_kernel != 0) bad(d, "conv_kernel", d.conv_kernel, "0 (no convolution)");
      return;
    case StateLayerType::kRgLru:
      require_positive(d, "inner_size", d.inner_size);
      require_positive(d, "num_heads (gate blocks)", d.num_heads);
      if (d.inner_size % d.num_heads != 0) {
        bad(d, "num_heads (gate blocks)", d.num_heads,
            fmt::format("a divisor of inner_size ({})", d.inner_size));
      }
      break;
  }
  if (d.conv_kernel < 2 || d.conv_kernel > 64) bad(d, "conv_kernel", d.conv_kernel, "in 2..64");
}

}  // namespace attnkit
