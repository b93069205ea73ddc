#pragma once
// Tensors: a non-owning strided view (TensorView) that converts to and from DLPack's
// DLTensor, and an owning host buffer (HostTensor) that hands out views. A view never
// frees; copying a HostTensor is explicit (clone()).

#include <dlpack/dlpack.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>

#include "attnkit/core/enums.h"
#include "attnkit/export.h"

namespace attnkit {

enum class DeviceType { kCpu, kCuda };

struct ATTNKIT_API Device {
  DeviceType type = DeviceType::kCpu;
  int index = 0;
  bool operator==(const Device&) const = default;
};

inline constexpr int kMaxTensorDims = 6;

// A non-owning view: `data` points at element [0, 0, ...]; shape and strides are in
// elements (not bytes). Strides may be any non-negative values (broadcast = 0).
struct ATTNKIT_API TensorView {
  void* data = nullptr;
  ScalarType dtype = ScalarType::kFloat32;
  Device device;
  int ndim = 0;
  std::array<int64_t, kMaxTensorDims> shape{};
  std::array<int64_t, kMaxTensorDims> strides{};

  // A contiguous (row-major) view of `shape` over `data`.
  static TensorView contiguous(void* data, ScalarType dtype, std::initializer_list<int64_t> shape,
                               Device device = {});
  static TensorView contiguous(void* data, ScalarType dtype, std::span<const int64_t> shape,
                               Device device = {});

  bool empty() const { return data == nullptr; }
  int64_t numel() const;
  int64_t size(int dim) const { return shape[static_cast<size_t>(dim)]; }
  int64_t stride(int dim) const { return strides[static_cast<size_t>(dim)]; }
  bool is_contiguous() const;
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data);
  }
  // e.g. "bfloat16[4, 8, 128] strides [1024, 128, 1] on cpu"
  std::string describe() const;
};

// DLPack interop. to_dlpack fills `out` (shape/strides point into `view`, which must
// outlive `out`). from_dlpack throws Error(kInvalidArgument) for dtypes/devices attnkit
// does not handle, naming them; it honours byte_offset and null (compact) strides.
ATTNKIT_API void to_dlpack(const TensorView& view, DLTensor& out);
ATTNKIT_API TensorView from_dlpack(const DLTensor& tensor);

// Fresh host memory is uninitialised: nothing may read it before writing it. With
// ATTNKIT_POISON_MEMORY on (the default in debug builds; every ctest preset sets it) what
// HostTensor and the host DeviceMemory hand out is filled with 0xFF bytes, NaN in float32,
// float16 and bfloat16, so that a reader of unwritten memory fails every time instead of
// once in a while; otherwise it is left as the allocator gave it.
inline constexpr unsigned char kFreshHostMemoryByte = 0xFF;
// Fills [p, p + bytes) with kFreshHostMemoryByte when ATTNKIT_POISON_MEMORY is on (read
// once per process).
ATTNKIT_API void poison_fresh_host_memory(void* p, size_t bytes);

// An owning, 64-byte aligned host buffer (uninitialised: see above).
class ATTNKIT_API HostTensor {
 public:
  HostTensor() = default;
  HostTensor(ScalarType dtype, std::span<const int64_t> shape);
  HostTensor(ScalarType dtype, std::initializer_list<int64_t> shape);
  HostTensor(HostTensor&&) noexcept = default;
  HostTensor& operator=(HostTensor&&) noexcept = default;
  HostTensor(const HostTensor&) = delete;
  HostTensor& operator=(const HostTensor&) = delete;

  HostTensor clone() const;
  TensorView view() const { return view_; }
  void* data() const { return view_.data; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(view_.data);
  }
  size_t nbytes() const { return nbytes_; }

 private:
  struct FreeDeleter {
    void operator()(void* p) const;
  };
  std::unique_ptr<void, FreeDeleter> storage_;
  size_t nbytes_ = 0;
  TensorView view_;
};

}  // namespace attnkit
