#include "attnkit/core/options.h"

#include <fmt/format.h>

#include <array>
#include <cstdlib>

#include "attnkit/core/error.h"

namespace attnkit {
namespace {

constexpr std::string_view kSwitchValues = "1, 0, on, off, true, false";

constexpr std::array<OptionInfo, 11> kOptions{{
    {Option::kAttentionBackend, "ATTNKIT_ATTENTION_BACKEND", "unset (automatic selection)",
     "a registered backend name (case-insensitive)",
     "Forces the global attention backend; an error together with a config's backend."},
    {Option::kPluginPath, "ATTNKIT_PLUGIN_PATH", "unset (no plugins)",
     "shared-library paths separated by ':'", "Backend plugins (plain-C ABI) loaded at start-up."},
    {Option::kChecked, "ATTNKIT_CHECKED", "on in debug builds, off in release builds",
     kSwitchValues,
     "Checked mode of forward(): slot mapping against the block table, NaN/inf scan; "
     "RunnerOptions::checked / `attnkit run --checked` override it."},
    {Option::kCpuIsa, "ATTNKIT_CPU_ISA", "the best target this CPU runs", "scalar, avx2, avx512",
     "SIMD target of the CPU_FLASH and CPU_MLA kernels."},
    {Option::kCpuAmx, "ATTNKIT_CPU_AMX",
     "on where the CPU has AMX-BF16 and the OS grants the tile state", kSwitchValues,
     "CPU_FLASH's and CPU_MLA's AMX tile kernels for bf16 queries and bf16 caches on the avx512 "
     "target (off: avx512_bf16 dot products)."},
    {Option::kCudaDependentLaunch, "ATTNKIT_CUDA_DEPENDENT_LAUNCH", "on (on sm_90+)", kSwitchValues,
     "Programmatic dependent launches of the CUDA kernels (off for A/B measurements and "
     "bisecting)."},
    {Option::kCudaFlashWgmma, "ATTNKIT_CUDA_FLASH_WGMMA", "on (on sm_90 when built for sm_90a)",
     kSwitchValues, "CUDA_FLASH's wgmma prefill kernels (off: the mma.sync kernels)."},
    {Option::kCudaMlaSm90Tiles, "ATTNKIT_CUDA_MLA_SM90_TILES",
     "on (where a block may use 227 KiB of shared memory: 9.0, 10.0)", kSwitchValues,
     "CUDA_MLA's large-row (prefill, many-head) tiles sized for sm_90's shared memory (off: the "
     "tiles sm_80 runs)."},
    {Option::kPoisonMemory, "ATTNKIT_POISON_MEMORY", "on in debug builds, off in release builds",
     kSwitchValues,
     "Fills fresh host tensors and host buffers with 0xFF bytes (NaN), so a reader of "
     "unwritten memory fails every time; the test presets turn it on."},
    {Option::kTuningCache, "ATTNKIT_TUNING_CACHE",
     "$XDG_CACHE_HOME/attnkit/tuning.json, else ~/.cache/attnkit/tuning.json", "a file path",
     "Where \"tuned\" backend choices keep their timings; --tuning-cache overrides it."},
    {Option::kHugePages, "ATTNKIT_HUGE_PAGES", "on (where Linux offers transparent huge pages)",
     kSwitchValues,
     "Host KV caches (and the CPU benchmarks' caches and read ceiling) of 2 MiB or more are "
     "2 MiB aligned and advised for transparent huge pages; off keeps 4 KiB pages. Read at each "
     "allocation."},
}};
// option_info() indexes kOptions by the enum.
static_assert([] {
  for (size_t i = 0; i < kOptions.size(); ++i) {
    if (static_cast<size_t>(kOptions[i].option) != i) return false;
  }
  return true;
}());

}  // namespace

std::span<const OptionInfo> all_options() { return kOptions; }

const OptionInfo& option_info(Option option) { return kOptions[static_cast<size_t>(option)]; }

std::optional<std::string> option_text(Option option) {
  const char* value = std::getenv(std::string(option_info(option).name).c_str());
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

std::optional<bool> option_switch(Option option) {
  const std::optional<std::string> text = option_text(option);
  if (!text) return std::nullopt;
  if (*text == "1" || *text == "on" || *text == "true") return true;
  if (*text == "0" || *text == "off" || *text == "false") return false;
  const OptionInfo& info = option_info(option);
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("{}={} is not valid (valid: {})", info.name, *text, info.valid));
}

std::string describe_options_in_force() {
  std::string list;
  for (const OptionInfo& info : kOptions) {
    if (const std::optional<std::string> text = option_text(info.option)) {
      list += fmt::format("{}{}={}", list.empty() ? "" : " ", info.name, *text);
    }
  }
  return list;
}

}  // namespace attnkit
