#include "attnkit/core/platform.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <charconv>
#include <string>

#include "attnkit/build_config.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace attnkit {

std::vector<std::string> CpuFeatures::names() const {
  std::vector<std::string> out;
  auto add = [&](bool on, const char* name) {
    if (on) out.emplace_back(name);
  };
  add(avx2, "avx2");
  add(fma, "fma");
  add(f16c, "f16c");
  add(avx512f, "avx512f");
  add(avx512bw, "avx512bw");
  add(avx512vl, "avx512vl");
  add(avx512dq, "avx512dq");
  add(avx512_bf16, "avx512_bf16");
  add(avx512_fp16, "avx512_fp16");
  add(amx_bf16, "amx_bf16");
  return out;
}

CpuFeatures detect_cpu_features() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const bool osxsave = (ecx >> 27) & 1u;
  const bool avx = (ecx >> 28) & 1u;
  if (!osxsave || !avx) return f;
  // The OS must save the YMM (bits 1-2) and, for AVX-512, opmask/ZMM state (bits 5-7).
  unsigned xcr0_lo = 0, xcr0_hi = 0;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  const bool os_avx = (xcr0_lo & 0x6u) == 0x6u;
  const bool os_avx512 = os_avx && (xcr0_lo & 0xe0u) == 0xe0u;
  if (!os_avx) return f;
  f.fma = (ecx >> 12) & 1u;
  f.f16c = (ecx >> 29) & 1u;
  unsigned max_leaf = __get_cpuid_max(0, nullptr);
  if (max_leaf < 7) return f;
  __cpuid_count(7, 0, eax, ebx, ecx, edx);
  f.avx2 = (ebx >> 5) & 1u;
  if (os_avx512) {
    f.avx512f = (ebx >> 16) & 1u;
    f.avx512dq = (ebx >> 17) & 1u;
    f.avx512bw = (ebx >> 30) & 1u;
    f.avx512vl = (ebx >> 31) & 1u;
    f.avx512_fp16 = (edx >> 23) & 1u;
    unsigned sub_eax = 0, sub_ebx = 0, sub_ecx = 0, sub_edx = 0;
    __cpuid_count(7, 1, sub_eax, sub_ebx, sub_ecx, sub_edx);
    f.avx512_bf16 = (sub_eax >> 5) & 1u;
    // AMX-TILE (edx bit 24) and AMX-BF16 (bit 22), with XTILECFG and XTILEDATA (XCR0 bits 17
    // and 18) managed by the OS.
    const bool os_amx = ((xcr0_lo >> 17) & 3u) == 3u;
    f.amx_bf16 = os_amx && ((edx >> 24) & 1u) && ((edx >> 22) & 1u);
  }
#endif
  return f;
}

std::string Platform::to_string() const {
  if (kind == PlatformKind::kCpu) return "cpu";
  return fmt::format("cuda:{}.{}", cc_major, cc_minor);
}

std::vector<int> cuda_architectures_in_binary() {
  std::vector<int> archs;
  std::string_view list = ATTNKIT_CUDA_ARCHITECTURES;
  while (!list.empty()) {
    size_t end = list.find(';');
    std::string_view item = list.substr(0, end);
    int value = 0;
    // Entries look like "80", "90", "90a" or "80-real"; the leading digits are the arch.
    std::from_chars(item.data(), item.data() + item.size(), value);
    if (value > 0) archs.push_back(value);
    if (end == std::string_view::npos) break;
    list.remove_prefix(end + 1);
  }
  return archs;
}

std::string Platform::kernels_in_binary_reason() const {
  if (kind == PlatformKind::kCpu) return {};
  if (!ATTNKIT_HAS_CUDA) return "CUDA kernels are not built into this binary";
  const std::vector<int> archs = cuda_architectures_in_binary();
  // Each listed architecture is compiled to SASS and PTX, so a device runs it when its
  // compute capability is at least that architecture (the driver JIT-compiles the PTX).
  for (int arch : archs) {
    if (compute_capability() >= arch) return {};
  }
  std::vector<std::string> names;
  names.reserve(archs.size());
  for (int arch : archs) names.push_back(fmt::format("sm_{}", arch));
  return fmt::format("this binary has no kernels for sm_{} (it carries {})", compute_capability(),
                     fmt::join(names, ", "));
}

bool Platform::kernels_in_binary() const { return kernels_in_binary_reason().empty(); }

Platform cpu_platform() {
  Platform p;
  p.kind = PlatformKind::kCpu;
  p.cpu = detect_cpu_features();
  p.is_local = true;
  return p;
}

Platform parse_platform(std::string_view text) {
  auto invalid = [&](std::string_view why) {
    return Error(ErrorCode::kInvalidArgument,
                 fmt::format("Invalid platform '{}'{}. Valid forms are: cpu, cuda, "
                             "cuda:MAJOR.MINOR (e.g. cuda:8.0, cuda:9.0)",
                             text, why));
  };
  std::string lower;
  for (char c : text)
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  if (lower == "cpu") return cpu_platform();
  if (lower == "cuda") {
    if (auto local = local_cuda_platform()) return *local;
    throw Error(ErrorCode::kNotFound,
                "Platform 'cuda' asks for the local GPU, but none is available here (" +
                    std::string(ATTNKIT_HAS_CUDA ? "no CUDA device found"
                                                 : "CUDA kernels are not built into this binary") +
                    "). Name a compute capability instead, e.g. cuda:9.0, to explain a GPU "
                    "you do not have.");
  }
  if (lower.rfind("cuda:", 0) != 0) throw invalid("");
  std::string_view cc = std::string_view(lower).substr(5);
  size_t dot = cc.find('.');
  if (dot == std::string_view::npos) throw invalid(": the compute capability needs MAJOR.MINOR");
  int major = -1, minor = -1;
  auto r1 = std::from_chars(cc.data(), cc.data() + dot, major);
  auto r2 = std::from_chars(cc.data() + dot + 1, cc.data() + cc.size(), minor);
  if (r1.ec != std::errc{} || r1.ptr != cc.data() + dot || r2.ec != std::errc{} ||
      r2.ptr != cc.data() + cc.size() || major < 1 || major > 20 || minor < 0 || minor > 9) {
    throw invalid(
        ": the compute capability must be MAJOR.MINOR with MAJOR in 1..20, MINOR in 0..9");
  }
  Platform p;
  p.kind = PlatformKind::kCuda;
  p.cc_major = major;
  p.cc_minor = minor;
  // A described GPU is local when it is the GPU of this machine.
  if (auto local = local_cuda_platform();
      local && local->cc_major == major && local->cc_minor == minor) {
    return *local;
  }
  return p;
}

Platform resolve_platform(std::string_view text) {
  if (!text.empty()) return parse_platform(text);
  if (std::optional<Platform> gpu = local_cuda_platform()) return *gpu;
  return cpu_platform();
}

}  // namespace attnkit
