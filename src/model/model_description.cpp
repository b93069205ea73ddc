#include "attnkit/model/model_description.h"

#include <fmt/format.h>

#include <algorithm>

namespace attnkit {

int ModelDescription::num_attention_layers() const {
  return static_cast<int>(std::count_if(layers.begin(), layers.end(),
                                        [](const LayerSpec& l) { return l.is_attention; }));
}

int ModelDescription::num_state_layers() const {
  return static_cast<int>(std::count_if(layers.begin(), layers.end(),
                                        [](const LayerSpec& l) { return l.state.has_value(); }));
}

DType resolve_model_dtype(std::optional<DType> requested, const ModelDescription& model,
                          const Platform& platform) {
  if (requested) return *requested;
  if (model.dtype && *model.dtype != DType::kFloat32) return *model.dtype;
  const bool bf16 = platform.kind != PlatformKind::kCuda || platform.compute_capability() >= 80;
  return bf16 ? DType::kBFloat16 : DType::kFloat16;
}

std::string describe_kind(const LayerSpec& layer) {
  if (layer.state) return fmt::format("mamba({})", to_string(layer.state->type));
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
