#include "attnkit/model/model_description.h"

#include <fmt/format.h>

#include <algorithm>

namespace attnkit {

int ModelDescription::num_attention_layers() const {
  return static_cast<int>(std::count_if(layers.begin(), layers.end(),
                                        [](const LayerSpec& l) { return l.is_attention; }));
}

std::string describe_kind(const LayerSpec& layer) {
  if (!layer.is_attention) return fmt::format("no attention ({})", layer.layer_type);
  const std::string_view kind = to_string(layer.kind);
  switch (layer.kind) {
    case KvCacheKind::kSlidingWindow:
    case KvCacheKind::kSlidingWindowMla:
      return fmt::format("{}({})", kind, layer.sliding_window.value_or(0));
    case KvCacheKind::kChunkedLocalAttention:
      return fmt::format("{}({})", kind, layer.chunk_size.value_or(0));
    default:
      return std::string(kind);
  }
}

}  // namespace attnkit
