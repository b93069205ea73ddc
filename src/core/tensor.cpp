#include "attnkit/core/tensor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "attnkit/core/options.h"

namespace attnkit {

TensorView TensorView::contiguous(void* data, ScalarType dtype, std::span<const int64_t> shape,
                                  Device device) {
  if (shape.size() > static_cast<size_t>(kMaxTensorDims)) {
    throw Error(ErrorCode::kInvalidArgument, fmt::format("tensor rank {} exceeds the maximum of {}",
                                                         shape.size(), kMaxTensorDims));
  }
  TensorView v;
  v.data = data;
  v.dtype = dtype;
  v.device = device;
  v.ndim = static_cast<int>(shape.size());
  int64_t stride = 1;
  for (int d = v.ndim - 1; d >= 0; --d) {
    v.shape[static_cast<size_t>(d)] = shape[static_cast<size_t>(d)];
    v.strides[static_cast<size_t>(d)] = stride;
    stride *= shape[static_cast<size_t>(d)];
  }
  return v;
}

TensorView TensorView::contiguous(void* data, ScalarType dtype,
                                  std::initializer_list<int64_t> shape, Device device) {
  return contiguous(data, dtype, std::span<const int64_t>(shape.begin(), shape.size()), device);
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int d = 0; d < ndim; ++d) n *= shape[static_cast<size_t>(d)];
  return n;
}

bool TensorView::is_contiguous() const {
  int64_t expected = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    const auto i = static_cast<size_t>(d);
    if (shape[i] != 1 && strides[i] != expected) return false;
    expected *= shape[i];
  }
  return true;
}

std::string TensorView::describe() const {
  std::vector<int64_t> s(shape.begin(), shape.begin() + ndim);
  std::vector<int64_t> st(strides.begin(), strides.begin() + ndim);
  return fmt::format("{}[{}] strides [{}] on {}{}", to_string(dtype), fmt::join(s, ", "),
                     fmt::join(st, ", "), device.type == DeviceType::kCpu ? "cpu" : "cuda:",
                     device.type == DeviceType::kCpu ? "" : std::to_string(device.index));
}

namespace {

DLDataType to_dl_dtype(ScalarType t) {
  switch (t) {
    case ScalarType::kFloat32:
      return {kDLFloat, 32, 1};
    case ScalarType::kFloat16:
      return {kDLFloat, 16, 1};
    case ScalarType::kBFloat16:
      return {kDLBfloat, 16, 1};
    // dlpack 0.6 has no fp8 codes: fp8 travels as raw bytes (uint8); the dtype is known
    // from the KV-cache dtype the layer was configured with.
    case ScalarType::kFp8E4M3:
    case ScalarType::kFp8E5M2:
      return {kDLUInt, 8, 1};
    case ScalarType::kInt32:
      return {kDLInt, 32, 1};
    case ScalarType::kInt64:
      return {kDLInt, 64, 1};
    case ScalarType::kUInt8:
      return {kDLUInt, 8, 1};
  }
  return {kDLFloat, 32, 1};
}

ScalarType from_dl_dtype(DLDataType t) {
  if (t.lanes == 1) {
    if (t.code == kDLFloat && t.bits == 32) return ScalarType::kFloat32;
    if (t.code == kDLFloat && t.bits == 16) return ScalarType::kFloat16;
    if (t.code == kDLBfloat && t.bits == 16) return ScalarType::kBFloat16;
    if (t.code == kDLInt && t.bits == 32) return ScalarType::kInt32;
    if (t.code == kDLInt && t.bits == 64) return ScalarType::kInt64;
    if (t.code == kDLUInt && t.bits == 8) return ScalarType::kUInt8;
  }
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("Unsupported DLPack dtype (code {}, bits {}, lanes {}). Valid dtypes "
                          "are: float32, float16, bfloat16, int32, int64, uint8",
                          t.code, t.bits, t.lanes));
}

}  // namespace

void to_dlpack(const TensorView& view, DLTensor& out) {
  out.data = view.data;
  out.device.device_type = view.device.type == DeviceType::kCpu ? kDLCPU : kDLCUDA;
  out.device.device_id = view.device.index;
  out.ndim = view.ndim;
  out.dtype = to_dl_dtype(view.dtype);
  out.shape = const_cast<int64_t*>(view.shape.data());
  out.strides = const_cast<int64_t*>(view.strides.data());
  out.byte_offset = 0;
}

TensorView from_dlpack(const DLTensor& t) {
  TensorView v;
  if (t.ndim < 0 || t.ndim > kMaxTensorDims) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("DLPack tensor rank {} is outside 0..{}", t.ndim, kMaxTensorDims));
  }
  switch (t.device.device_type) {
    case kDLCPU:
      v.device = {DeviceType::kCpu, 0};
      break;
    case kDLCUDA:
      v.device = {DeviceType::kCuda, t.device.device_id};
      break;
    default:
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("Unsupported DLPack device type {}. Valid device types are: "
                              "kDLCPU (1), kDLCUDA (2)",
                              static_cast<int>(t.device.device_type)));
  }
  v.dtype = from_dl_dtype(t.dtype);
  v.data = static_cast<char*>(t.data) + t.byte_offset;
  v.ndim = t.ndim;
  int64_t stride = 1;
  for (int d = t.ndim - 1; d >= 0; --d) {
    const auto i = static_cast<size_t>(d);
    v.shape[i] = t.shape[d];
    v.strides[i] = t.strides != nullptr ? t.strides[d] : stride;
    stride *= t.shape[d];
  }
  return v;
}

HostTensor::HostTensor(ScalarType dtype, std::span<const int64_t> shape) {
  int64_t n = 1;
  for (int64_t s : shape) {
    if (s < 0) {
      throw Error(ErrorCode::kInvalidArgument, fmt::format("negative tensor dimension {}", s));
    }
    n *= s;
  }
  nbytes_ = static_cast<size_t>(n) * size_of(dtype);
  const size_t alloc = ((nbytes_ + 63) / 64) * 64;
  void* p = alloc == 0 ? nullptr : std::aligned_alloc(64, alloc);
  if (alloc != 0 && p == nullptr) {
    throw Error(ErrorCode::kOutOfMemory, fmt::format("cannot allocate {} bytes", alloc));
  }
  poison_fresh_host_memory(p, alloc);
  storage_.reset(p);
  view_ = TensorView::contiguous(p, dtype, shape);
}

void poison_fresh_host_memory(void* p, size_t bytes) {
#ifdef NDEBUG
  constexpr bool kDefault = false;
#else
  constexpr bool kDefault = true;
#endif
  static const bool poison = option_switch(Option::kPoisonMemory).value_or(kDefault);
  if (poison && p != nullptr) std::memset(p, kFreshHostMemoryByte, bytes);
}

HostTensor::HostTensor(ScalarType dtype, std::initializer_list<int64_t> shape)
    : HostTensor(dtype, std::span<const int64_t>(shape.begin(), shape.size())) {}

HostTensor HostTensor::clone() const {
  HostTensor copy(view_.dtype,
                  std::span<const int64_t>(view_.shape.data(), static_cast<size_t>(view_.ndim)));
  if (nbytes_ != 0) std::memcpy(copy.data(), data(), nbytes_);
  return copy;
}

void HostTensor::FreeDeleter::operator()(void* p) const { std::free(p); }

}  // namespace attnkit
