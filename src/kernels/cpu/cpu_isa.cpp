#include "attnkit/kernels/cpu_isa.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <atomic>
#include <cctype>
#include <cstring>
#include <string>

#include "attnkit/core/error.h"
#include "attnkit/core/options.h"
#include "kernels/cpu/prefetch.h"

namespace attnkit::cpu {
namespace {

constexpr int kNoOverride = -1;
std::atomic<int> g_override{kNoOverride};
std::atomic<int> g_amx_override{kNoOverride};

const CpuFeatures& local_features() {
  static const CpuFeatures features = detect_cpu_features();
  return features;
}

// The target named by ATTNKIT_CPU_ISA, read once; throws on a bad value each time asked.
std::optional<CpuIsa> env_isa() {
  static const std::string text = option_text(Option::kCpuIsa).value_or("");
  if (text.empty()) return std::nullopt;
  try {
    return parse_cpu_isa(text);
  } catch (const Error& e) {
    throw Error(e.code(), std::string(e.what()) + " (from ATTNKIT_CPU_ISA)");
  }
}

void require_supported(CpuIsa isa) {
  if (!cpu_supports(local_features(), isa)) {
    std::string valid;
    for (CpuIsa runnable : runnable_cpu_isas()) {
      if (!valid.empty()) valid += ", ";
      valid += to_string(runnable);
    }
    throw Error(ErrorCode::kUnsupported, "CPU ISA '" + std::string(to_string(isa)) +
                                             "' is not supported by this CPU (runnable: " + valid +
                                             ")");
  }
}

}  // namespace

std::string_view to_string(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kScalar:
      return "scalar";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512:
      return "avx512";
  }
  return "unknown";
}

CpuIsa parse_cpu_isa(std::string_view text) {
  std::string lower(text);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (CpuIsa isa : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (lower == to_string(isa)) return isa;
  }
  throw Error(ErrorCode::kInvalidArgument,
              "unknown CPU ISA '" + std::string(text) + "' (valid: avx2, avx512, scalar)");
}

bool cpu_supports(const CpuFeatures& f, CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kScalar:
      return true;
    case CpuIsa::kAvx2:
      return f.avx2 && f.fma && f.f16c;
    case CpuIsa::kAvx512:
      return f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.fma && f.f16c;
  }
  return false;
}

std::vector<CpuIsa> runnable_cpu_isas() {
  std::vector<CpuIsa> out;
  for (CpuIsa isa : {CpuIsa::kScalar, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (cpu_supports(local_features(), isa)) out.push_back(isa);
  }
  return out;
}

CpuIsa best_cpu_isa(const CpuFeatures& features) {
  if (cpu_supports(features, CpuIsa::kAvx512)) return CpuIsa::kAvx512;
  if (cpu_supports(features, CpuIsa::kAvx2)) return CpuIsa::kAvx2;
  return CpuIsa::kScalar;
}

CpuIsa active_cpu_isa() {
  const int forced = g_override.load(std::memory_order_relaxed);
  if (forced != kNoOverride) return static_cast<CpuIsa>(forced);
  if (std::optional<CpuIsa> from_env = env_isa()) {
    require_supported(*from_env);
    return *from_env;
  }
  return best_cpu_isa(local_features());
}

void set_cpu_isa_override(std::optional<CpuIsa> isa) {
  if (isa) require_supported(*isa);
  g_override.store(isa ? static_cast<int>(*isa) : kNoOverride, std::memory_order_relaxed);
}

bool avx512_bf16_dot_enabled() { return local_features().avx512_bf16; }

bool amx_bf16_available() {
  static const bool granted = [] {
    if (!local_features().amx_bf16) return false;
#if defined(__linux__) && defined(__x86_64__)
    // ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA: without it the first tile instruction
    // faults. The grant is for the whole process and lasts.
    constexpr long kArchReqXcompPerm = 0x1023;
    constexpr long kXfeatureXtiledata = 18;
    return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
    return false;
#endif
  }();
  return granted;
}

bool amx_bf16_enabled() {
  const int forced = g_amx_override.load(std::memory_order_relaxed);
  if (forced != kNoOverride) return forced != 0;
  static const std::optional<bool> from_env = option_switch(Option::kCpuAmx);
  if (from_env.has_value()) {
    if (*from_env && !amx_bf16_available()) {
      throw Error(ErrorCode::kUnsupported,
                  "ATTNKIT_CPU_AMX is on but this machine cannot run AMX-BF16 tile kernels (the "
                  "CPU lacks AMX-TILE/AMX-BF16 or the OS did not grant the tile state); valid "
                  "here: off");
    }
    return *from_env;
  }
  return amx_bf16_available();
}

void set_cpu_amx_override(std::optional<bool> on) {
  if (on.value_or(false) && !amx_bf16_available()) {
    throw Error(ErrorCode::kUnsupported,
                "AMX tile kernels forced on, but this machine cannot run AMX-BF16 (the CPU lacks "
                "AMX-TILE/AMX-BF16 or the OS did not grant the tile state)");
  }
  g_amx_override.store(on ? static_cast<int>(*on) : kNoOverride, std::memory_order_relaxed);
}

int decode_prefetch_tiles() {
  static const int tiles = [] {
#if defined(__x86_64__) || defined(__i386__)
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    char vendor[13] = {};
    if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) != 0) {
      std::memcpy(vendor, &ebx, 4);
      std::memcpy(vendor + 4, &edx, 4);
      std::memcpy(vendor + 8, &ecx, 4);
      if (std::strcmp(vendor, "GenuineIntel") == 0) return 1;
      // AMD family 0x19 models 0x00-0x0f: Zen 3 (EPYC Milan). 1 tile ahead against 4, one
      // thread from DRAM: x1.02-1.11 on the decode shapes of cpu_attention_bench
      // (bench/results/cpu_flash_avx2.md); Zen 4 (family 0x19 as well, other models) takes
      // the default below.
      if (std::strcmp(vendor, "AuthenticAMD") == 0 && __get_cpuid(1, &eax, &ebx, &ecx, &edx) != 0) {
        const unsigned family = ((eax >> 8) & 0xfu) + ((eax >> 20) & 0xffu);
        const unsigned model = ((eax >> 4) & 0xfu) | (((eax >> 16) & 0xfu) << 4);
        if (family == 0x19 && model < 0x10) return 1;
      }
    }
#endif
    // Zen 4 (AMD EPYC family 0x19 model 0x11): 2 tiles against 4, 7 alternating rounds,
    // x1.01-1.20 on the AVX-512 decode shapes and x0.96-1.16 with the AVX2 kernels
    // (bench/results/cpu_flash.md, 2026-12-07); every machine measured so far ran best at 1
    // or 2.
    return 2;
  }();
  return tiles;
}

}  // namespace attnkit::cpu
