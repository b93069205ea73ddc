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

float* thread_scratch(int64_t floats) noexcept {
  thread_local ScratchArena arena;
  if (floats <= arena.capacity) return arena.data;
  // Whole pages, so that growing by a little does not reallocate at every step.
  constexpr int64_t kPage = 4096;
  const int64_t bytes = (floats * static_cast<int64_t>(sizeof(float)) + kPage - 1) / kPage * kPage;
  std::free(arena.data);
  arena.data = static_cast<float*>(std::aligned_alloc(kPage, static_cast<size_t>(bytes)));
  arena.capacity = arena.data != nullptr ? bytes / static_cast<int64_t>(sizeof(float)) : 0;
  return arena.data;
}

}  // namespace attnkit::cpu
