// The local GPU, through the CUDA runtime when this binary has CUDA.
#include "attnkit/build_config.h"
#include "attnkit/core/platform.h"

#if ATTNKIT_HAS_CUDA
#include <cuda_runtime_api.h>
#endif

namespace attnkit {

std::optional<Platform> local_cuda_platform(int device) {
#if ATTNKIT_HAS_CUDA
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || device < 0 || device >= count) {
    cudaGetLastError();  // clear the sticky "no device" error
    return std::nullopt;
  }
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, device) != cudaSuccess) return std::nullopt;
  Platform p;
  p.kind = PlatformKind::kCuda;
  p.cc_major = prop.major;
  p.cc_minor = prop.minor;
  p.device_name = prop.name;
  p.sm_count = prop.multiProcessorCount;
  p.is_local = true;
  return p;
#else
  (void)device;
  return std::nullopt;
#endif
}

}  // namespace attnkit
