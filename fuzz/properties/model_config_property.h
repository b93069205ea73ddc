#pragma once
// Property of the Hugging Face config.json reader, shared by its fuzzer and the
// regression tests: any text either yields a model description whose every attention layer
// converts to a SelectorConfig and layer params with sane shapes, or throws attnkit::Error.
#include <optional>
#include <string_view>

#include "attnkit/core/error.h"
#include "attnkit/model/model_loader.h"
#include "attnkit/selector/layer_config.h"
#include "properties/property_violation.h"

namespace attnkit::fuzz {

inline void check_model_config(std::string_view text) {
  ModelDescription model;
  try {
    model = parse_model_config_text(text, "fuzz", "fuzz input");
  } catch (const Error&) {
    return;
  }
  for (const LayerSpec& layer : model.layers) {
    if (!layer.is_attention) continue;
    try {
      const SelectorConfig config =
          selector_config(layer, DType::kBFloat16, KvCacheDType::kAuto, std::nullopt);
      const AttentionLayerParams params =
          layer_params(layer, DType::kBFloat16, KvCacheDType::kAuto);
      // A layer the reader accepted must be a shape attention can have.
      if (params.num_heads <= 0 || params.num_kv_heads <= 0 || params.head_size <= 0 ||
          params.num_heads % params.num_kv_heads != 0 || config.head_size != params.head_size) {
        throw PropertyViolation("accepted layer with an impossible shape");
      }
    } catch (const Error&) {
    }
  }
}

}  // namespace attnkit::fuzz
