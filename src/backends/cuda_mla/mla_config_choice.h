#pragma once
// Which tile configuration CUDA_MLA's large-row work runs with. By default the launcher
// picks MlaLargeSm90Config where the device lets a CTA opt into its shared memory (sm_90)
// and MlaLargeConfig elsewhere (sm_80); ATTNKIT_CUDA_MLA_SM90_TILES=0 (core/options.h)
// forces MlaLargeConfig for the process. Tests force it per call so that the configuration
// sm_80 runs stays covered on an sm_90 GPU. Plain C++ (no CUDA types).

namespace attnkit::cuda_mla {

enum class LargeRowConfig {
  kAuto,  // the largest configuration the device's shared memory holds
  kSm80,  // MlaLargeConfig everywhere
};

// Process-wide; takes effect for launches after the call.
void set_large_row_config(LargeRowConfig config);
LargeRowConfig large_row_config();

}  // namespace attnkit::cuda_mla
