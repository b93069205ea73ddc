// Which kernel variant each built-in backend runs: the values below the selector that pick
// kernels (the CPU ISA, the CUDA launch variants) as the kernels themselves resolve them.

#include <string>
#include <string_view>

#include "attnkit/build_config.h"
#include "attnkit/core/options.h"
#include "attnkit/explain/explain.h"
#include "attnkit/kernels/cpu_isa.h"

namespace attnkit {

std::string kernel_variant(std::string_view backend, const Platform& platform) {
  if (backend == "CPU_FLASH" || backend == "CPU_MLA") {
    std::string variant = "cpu isa " + std::string(cpu::to_string(cpu::active_cpu_isa()));
    // flash_driver_impl.h, mla_kernel_impl.h: the AVX-512 kernels take avx512_bf16's dot
    // products for bf16 queries and caches where the CPU has them.
    if (cpu::active_cpu_isa() == cpu::CpuIsa::kAvx512 && cpu::avx512_bf16_dot_enabled()) {
      variant += ", bf16 dot products for bf16 queries and caches";
    }
    // mla_attention.cpp, flash_attention.cpp: AMX tile kernels for bf16 queries and caches
    // (head sizes multiples of 32; CPU_FLASH: items of 8 or more rows per KV head) where the
    // machine runs them and ATTNKIT_CPU_AMX does not turn them off.
    if (cpu::active_cpu_isa() == cpu::CpuIsa::kAvx512 && cpu::amx_bf16_enabled()) {
      variant += backend == "CPU_MLA"
                     ? ", AMX tiles for bf16 queries and caches"
                     : ", AMX tiles for bf16 queries and caches (8+ query rows per KV head)";
    }
    return variant;
  }
  if (backend.substr(0, 5) != "CUDA_") return {};
  const int cc = platform.compute_capability();
  // kernel_launch.cuh: dependent launches on sm_90+ unless the option turns them off.
  const bool dependent = cc >= 90 && option_switch(Option::kCudaDependentLaunch) != false;
  std::string variant = dependent ? "dependent launches on" : "dependent launches off";
  if (backend == "CUDA_FLASH") {
    // flash_wgmma.cu: the sm_90a prefill runs on 9.0 devices when built and not turned off,
    // for 16-bit and fp8 caches (fp8 tiles converted by its producer warpgroup).
    const bool wgmma =
        ATTNKIT_CUDA_SM90A && cc == 90 && option_switch(Option::kCudaFlashWgmma) != false;
    variant = std::string(wgmma ? "wgmma prefill (sm_90a)" : "mma.sync prefill") + ", " + variant;
  }
  if (backend == "CUDA_MLA") {
    // mla_launch.cuh: the sm_90 large-row tiles where a block may opt into 227 KiB of shared
    // memory (compute capabilities 9.0 and 10.0), unless the option turns them off.
    const bool sm90_tiles =
        (cc == 90 || cc == 100) && option_switch(Option::kCudaMlaSm90Tiles) != false;
    variant = std::string(sm90_tiles ? "sm_90 large-row tiles" : "sm_80 large-row tiles") + ", " +
              variant;
  }
  return variant;
}

}  // namespace attnkit
