#pragma once
// Where attention runs. A Platform is either detected (this machine's CPU, a local GPU)
// or described by the user ("cpu", "cuda:9.0") so that selection can be explained for a
// machine the user does not have.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attnkit/core/enums.h"
#include "attnkit/export.h"

namespace attnkit {

// x86 ISA features that the CPU kernels dispatch on (detected with cpuid).
struct ATTNKIT_API CpuFeatures {
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512dq = false;
  bool avx512_bf16 = false;
  bool avx512_fp16 = false;
  // AMX-TILE + AMX-BF16 with the tile state enabled in XCR0 (Linux still requires a
  // per-process request before the first tile instruction: cpu::amx_bf16_enabled()).
  bool amx_bf16 = false;

  // Feature names that are present, e.g. {"avx2", "fma", "avx512f", ...}.
  std::vector<std::string> names() const;
};

ATTNKIT_API CpuFeatures detect_cpu_features();

struct ATTNKIT_API Platform {
  PlatformKind kind = PlatformKind::kCpu;
  // CPU: ISA features (detected for the local CPU; for a described "cpu" platform the
  // local features are used too).
  CpuFeatures cpu;
  // CUDA: compute capability (e.g. 9.0 -> major 9, minor 0) and device name (empty when
  // the platform is described rather than detected).
  int cc_major = 0;
  int cc_minor = 0;
  std::string device_name;
  // CUDA: streaming multiprocessors of the device (0 when described).
  int sm_count = 0;
  // True when this platform is a real device on this machine (not only described).
  bool is_local = false;

  // 90 for cuda:9.0; 0 on CPU.
  int compute_capability() const { return cc_major * 10 + cc_minor; }
  // "cpu" or "cuda:9.0".
  std::string to_string() const;
  // True when this binary contains kernels that can run on this platform: always for CPU;
  // for CUDA, when the build carries CUDA kernels for an architecture this device runs
  // (same major, SASS minor <= device minor; see cuda_architectures_in_binary()).
  bool kernels_in_binary() const;
  // Why kernels_in_binary() is false, or empty.
  std::string kernels_in_binary_reason() const;
};

// Parses "cpu", "cuda" (local device 0, or an error when none) or "cuda:MAJOR.MINOR".
// Unknown text throws Error(kInvalidArgument) naming it and listing the valid forms.
ATTNKIT_API Platform parse_platform(std::string_view text);
// The local CPU.
ATTNKIT_API Platform cpu_platform();
// The platform `text` names (parse_platform); empty = this machine: its first GPU when this
// binary has CUDA and one is present, else its CPU.
ATTNKIT_API Platform resolve_platform(std::string_view text);
// The local GPU `device` when this binary has CUDA and a GPU is present, else nullopt.
ATTNKIT_API std::optional<Platform> local_cuda_platform(int device = 0);

// CUDA architectures compiled into this binary, e.g. {80, 90}; empty without CUDA.
ATTNKIT_API std::vector<int> cuda_architectures_in_binary();

}  // namespace attnkit
