#pragma once
// The process-wide switches attnkit reads from the environment, declared in one place:
// name, default, valid values and help text (docs/options.md is the same table; `attnkit
// options` prints it). Code never calls getenv for them; it asks here.
//
// Reading: option_text() reads the variable when asked (the selector and the plugin
// loader ask once per engine start-up); the switches below the selector (checked mode,
// the CPU ISA, the CUDA launch variants) ask once per process and keep the answer.
// A value outside the valid ones is Error(kInvalidArgument) naming the variable, the
// value and the valid values.

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "attnkit/export.h"

namespace attnkit {

enum class Option {
  kAttentionBackend,     // ATTNKIT_ATTENTION_BACKEND: forces the global backend
  kPluginPath,           // ATTNKIT_PLUGIN_PATH: backend plugins to load
  kChecked,              // ATTNKIT_CHECKED: checked mode of forward()
  kCpuIsa,               // ATTNKIT_CPU_ISA: SIMD target of the CPU kernels
  kCpuAmx,               // ATTNKIT_CPU_AMX: CPU_MLA's AMX tile kernels
  kCudaDependentLaunch,  // ATTNKIT_CUDA_DEPENDENT_LAUNCH: programmatic dependent launches
  kCudaFlashWgmma,       // ATTNKIT_CUDA_FLASH_WGMMA: CUDA_FLASH's sm_90a wgmma prefill
  kCudaMlaSm90Tiles,     // ATTNKIT_CUDA_MLA_SM90_TILES: CUDA_MLA's sm_90 large-row tiles
  kPoisonMemory,         // ATTNKIT_POISON_MEMORY: fresh host memory filled with NaN bytes
  kTuningCache,          // ATTNKIT_TUNING_CACHE: the file of "tuned" backend timings
  kHugePages,            // ATTNKIT_HUGE_PAGES: transparent huge pages for host KV caches
};

struct ATTNKIT_API OptionInfo {
  Option option;
  std::string_view name;           // the environment variable
  std::string_view default_value;  // what applies when unset, in words
  std::string_view valid;          // the valid values, in words ("1, 0, on, off, ...")
  std::string_view help;
};

// Every option, in the order of the enum.
ATTNKIT_API std::span<const OptionInfo> all_options();
ATTNKIT_API const OptionInfo& option_info(Option option);

// The variable's value now, nullopt when unset or empty.
ATTNKIT_API std::optional<std::string> option_text(Option option);

// A switch (1/0, on/off, true/false): nullopt when unset, else its value; any other value
// throws Error naming the variable, the value and the valid ones.
ATTNKIT_API std::optional<bool> option_switch(Option option);

// "NAME=value" for every option set now ("" when none), for reports.
ATTNKIT_API std::string describe_options_in_force();

}  // namespace attnkit
