#include "backends/cuda_mla/mla_config_choice.h"

#include <atomic>

#include "attnkit/core/options.h"

namespace attnkit::cuda_mla {
namespace {

std::atomic<LargeRowConfig> g_large_row_config{LargeRowConfig::kAuto};

}  // namespace

void set_large_row_config(LargeRowConfig config) {
  g_large_row_config.store(config, std::memory_order_relaxed);
}

LargeRowConfig large_row_config() {
  // The option is read once per process, like the other switches below the selector.
  static const bool sm90_tiles = option_switch(Option::kCudaMlaSm90Tiles) != false;
  if (!sm90_tiles) return LargeRowConfig::kSm80;
  return g_large_row_config.load(std::memory_order_relaxed);
}

}  // namespace attnkit::cuda_mla
