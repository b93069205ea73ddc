#include "kernels/cpu/thread_scratch.h"

#include <cstdlib>

namespace attnkit::cpu {

namespace {

struct ScratchArena {
  float* data = nullptr;
  int64_t capacity = 0;  // floats
  ScratchArena() = default;
  ScratchArena(const ScratchArena&) = delete;
  ScratchArena& operator=(const ScratchArena&) = delete;
  ~ScratchArena() { std::free(data); }
};

}  // namespace

// The buffer starts 33 cache lines into its first page: scratch at the same offsets within
// a page as the (page-aligned) cache blocks the kernels read made CPU_FLASH's AVX2 decode
// measurably slower (3 rounds alternating, x0.88-0.97 on four of the 32/8 d128 shapes
// against this placement), which looks like 4K aliasing of the scratch's stores with the
// cache's loads.
constexpr int64_t kStartFloats = int64_t{33} * 64 / static_cast<int64_t>(sizeof(float));

float* thread_scratch(int64_t floats) noexcept {
  thread_local ScratchArena arena;
  if (floats + kStartFloats <= arena.capacity) return arena.data + kStartFloats;
  // Whole pages, so that growing by a little does not reallocate at every step.
  constexpr int64_t kPage = 4096;
  const int64_t bytes =
      ((floats + kStartFloats) * static_cast<int64_t>(sizeof(float)) + kPage - 1) / kPage * kPage;
  std::free(arena.data);
  arena.data = static_cast<float*>(std::aligned_alloc(kPage, static_cast<size_t>(bytes)));
  arena.capacity = arena.data != nullptr ? bytes / static_cast<int64_t>(sizeof(float)) : 0;
  return arena.data != nullptr ? arena.data + kStartFloats : nullptr;
}

}  // namespace attnkit::cpu
