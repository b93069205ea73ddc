#pragma once
// Per-thread scratch memory of the CPU kernels that outlives the call: each thread that
// runs a kernel keeps one buffer, grown when a call needs more and never shrunk, so that a
// step whose metadata (and so its workspace) is new does not allocate, zero and page-fault
// its threads' scratch again (hundreds of KiB per thread for the AMX kernels: about as long
// as a small decode step itself).

#include <cstdint>

namespace attnkit::cpu {

// The calling thread's scratch: at least `floats` floats, 64-byte aligned, contents left
// from earlier calls (never zeroed). nullptr when the memory cannot be had; kernels call it
// inside their OpenMP regions, where an exception may not escape, and report the failure
// after the region.
float* thread_scratch(int64_t floats) noexcept;

}  // namespace attnkit::cpu
