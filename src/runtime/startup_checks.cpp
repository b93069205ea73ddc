#include "runtime/startup_checks.h"

#include <fmt/format.h>

#include "attnkit/core/error.h"

namespace attnkit {

void require_runnable(const StartupPlan& plan, std::string_view model_name) {
  if (plan.layers.empty()) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("model {} has no attention layers to run", model_name));
  }
  for (const LayerPlan& layer : plan.layers) {
    if (layer.selection->runnable) continue;
    throw Error(ErrorCode::kUnsupported,
                fmt::format("layer {} ({}): the selected backend {} cannot run here: {}",
                            layer.layer.index, layer.layer.name, layer.selection->backend,
                            layer.selection->binary_reason.value_or("not runnable")));
  }
}

int pool_blocks(const KvCacheConfig& config, int num_blocks, size_t bytes,
                std::string_view bytes_name) {
  if (config.bytes_per_block() == 0) return 2;
  if (num_blocks > 0) return num_blocks;
  const int held = config.num_blocks_for_bytes(bytes);
  if (held < 2) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} {} holds fewer than 2 blocks (block 0 is the null block): one "
                            "block of every layer takes {} bytes",
                            bytes_name, bytes, config.bytes_per_block()));
  }
  return held;
}

}  // namespace attnkit
