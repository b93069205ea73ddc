#include "backends/cuda_mla/mla_config_choice.h"

#include <atomic>

namespace attnkit::cuda_mla {
namespace {

std::atomic<LargeRowConfig> g_large_row_config{LargeRowConfig::kAuto};

}  // namespace

void set_large_row_config(LargeRowConfig config) {
  g_large_row_config.store(config, std::memory_order_relaxed);
}

LargeRowConfig large_row_config() { return g_large_row_config.load(std::memory_order_relaxed); }

}  // namespace attnkit::cuda_mla
