#pragma once
// Counts the C++ heap allocations (every form of global operator new) that the calling
// process makes while a CountAllocations object is alive. This test binary replaces the
// global operator new and delete (allocation_counter.cpp) to do it; other threads'
// allocations count too (the CPU kernels run on an OpenMP team).

#include <cstdint>

namespace attnkit::testing {

class CountAllocations {
 public:
  CountAllocations();
  ~CountAllocations();
  CountAllocations(const CountAllocations&) = delete;
  CountAllocations& operator=(const CountAllocations&) = delete;
  // Allocations since construction.
  int64_t count() const;

 private:
  int64_t start_;
};

}  // namespace attnkit::testing
