#pragma once
// The SIMD targets the CPU_FLASH kernels are compiled for, and which one runs.
//
// Each target's kernels live in their own translation unit compiled for that ISA
// (flash_kernels_<isa>.cpp); the entry points in flash_attention.h pick one per call from
// active_cpu_isa(). Tests force each target in turn with set_cpu_isa_override(); users can
// force one with the environment variable ATTNKIT_CPU_ISA=scalar|avx2|avx512.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attnkit/core/platform.h"
#include "attnkit/export.h"

namespace attnkit::cpu {

enum class CpuIsa {
  kScalar,  // portable C++ (the compiler may auto-vectorise with the baseline ISA)
  kAvx2,    // AVX2 + FMA + F16C, 8 fp32 lanes
  kAvx512,  // AVX-512 F/BW/VL/DQ, 16 fp32 lanes; uses avx512_bf16 dot products when present
};

ATTNKIT_API std::string_view to_string(CpuIsa isa);
// "scalar", "avx2", "avx512" (case-insensitive); anything else throws Error listing them.
ATTNKIT_API CpuIsa parse_cpu_isa(std::string_view text);

// Whether `features` can run `isa`.
ATTNKIT_API bool cpu_supports(const CpuFeatures& features, CpuIsa isa);
// Every target this machine can run, best last (scalar first).
ATTNKIT_API std::vector<CpuIsa> runnable_cpu_isas();
// The best target for `features`.
ATTNKIT_API CpuIsa best_cpu_isa(const CpuFeatures& features);

// The target the kernels use now: the override if set, else ATTNKIT_CPU_ISA if set (read
// once), else the best one this machine runs. Forcing a target the machine cannot run
// throws Error(kUnsupported).
ATTNKIT_API CpuIsa active_cpu_isa();
// Forces (or, with nullopt, un-forces) a target for this process. Throws Error when the
// machine cannot run `isa`.
ATTNKIT_API void set_cpu_isa_override(std::optional<CpuIsa> isa);
// Whether the avx512 target may use avx512_bf16 dot products (true when the CPU has them).
ATTNKIT_API bool avx512_bf16_dot_enabled();
// Whether this machine can run AMX-BF16 tile kernels: the CPU has them and the OS granted
// this process the tile state (asked for once, on Linux with arch_prctl).
ATTNKIT_API bool amx_bf16_available();
// Whether the avx512 target uses its AMX tile kernels (CPU_FLASH and CPU_MLA, bf16 queries
// and caches):
// the override if set, else ATTNKIT_CPU_AMX if set, else amx_bf16_available(). Forcing them
// on where they are not available throws Error(kUnsupported), from the override at once,
// from the environment when asked.
ATTNKIT_API bool amx_bf16_enabled();
// Forces (or, with nullopt, un-forces) the AMX tile kernels on or off for this process.
ATTNKIT_API void set_cpu_amx_override(std::optional<bool> on);

}  // namespace attnkit::cpu
