#pragma once
// Host staging for the CUDA metadata builders: every array a step's kernels read is packed
// into one host vector, each section at a 16-byte-aligned offset, so that build() makes a
// single host->device copy and hands out device pointers as base + offset.

#include <cstddef>
#include <cstring>
#include <vector>

namespace attnkit::cuda {

class HostStaging {
 public:
  void clear() { bytes_.clear(); }

  // Appends v's elements and returns the section's byte offset.
  template <typename T>
  size_t append(const std::vector<T>& v) {
    const size_t offset = (bytes_.size() + 15) / 16 * 16;
    const size_t n = v.size() * sizeof(T);
    bytes_.resize(offset + n);
    if (n > 0) std::memcpy(bytes_.data() + offset, v.data(), n);
    return offset;
  }

  // Appends `count` zero elements of T and returns the section's byte offset.
  template <typename T>
  size_t append_zeros(size_t count) {
    const size_t offset = (bytes_.size() + 15) / 16 * 16;
    bytes_.resize(offset + count * sizeof(T), 0);
    return offset;
  }

  const char* data() const { return bytes_.data(); }
  size_t size() const { return bytes_.size(); }

 private:
  std::vector<char> bytes_;
};

}  // namespace attnkit::cuda
