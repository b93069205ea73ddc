#pragma once
// CPU_FLASH: tiled online-softmax (flash) attention on the CPU, SIMD (AVX-512 / AVX2 /
// portable) chosen at run time, multithreaded with OpenMP, split-KV decode.

#include <memory>

#include "attnkit/backend/backend.h"

namespace attnkit {

std::unique_ptr<AttentionBackend> make_cpu_flash_backend();

// The capabilities CPU_FLASH declares (exactly what tests/backends/cpu_flash proves).
const BackendCapabilities& cpu_flash_capabilities();

}  // namespace attnkit
