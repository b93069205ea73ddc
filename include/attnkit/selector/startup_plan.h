#pragma once
// The start-up plan of a model: every attention layer's backend (selection, once per
// distinct layer configuration) and the KV cache those backends shape. The one function
// that makes it serves `attnkit explain` (which reports it) and the model runner (which
// runs it), so that what explain says is what run does.

#include <memory>
#include <optional>
#include <vector>

#include "attnkit/core/platform.h"
#include "attnkit/export.h"
#include "attnkit/kv_cache/kv_cache_config.h"
#include "attnkit/model/model_description.h"
#include "attnkit/selector/selector.h"

namespace attnkit {

struct ATTNKIT_API LayerPlan {
  LayerSpec layer;
  SelectorConfig config;
  // Shared by every layer with the same configuration.
  std::shared_ptr<const SelectionResult> selection;
  KvCacheSpec kv_spec;  // spec_for_layer(config), before the planner's block size
};

struct ATTNKIT_API StartupPlan {
  std::vector<LayerPlan> layers;  // layers served by a backend (attention, state), in order
  KvCacheConfig kv_cache;
  // Things a user should know, e.g. a backend_per_kind key that matches no layer.
  std::vector<std::string> warnings;
};

struct ATTNKIT_API StartupRequest {
  DType dtype = DType::kBFloat16;
  KvCacheDType kv_cache_dtype = KvCacheDType::kAuto;
  std::optional<int> block_size;  // the user's, if any
};

// Selects a backend for every attention layer of `model` on `platform` and plans the KV
// cache from them. A selection error (strict mode, nothing valid) is rethrown naming the
// layer: "Layer N (name, kind): <the selector's message>"; a planning error is
// plan_kv_cache()'s (which names the layer too). A selected
// backend that cannot run here (not built into this binary) is kept: its selection says
// so (runnable, binary_reason) and the caller decides. A backend_per_kind key whose kind
// no layer has is not an error (one attention config may serve many models) but a
// warning naming the kinds the model has.
// One warning per backend_per_kind key of `config` that no layer of `plan` has.
ATTNKIT_API std::vector<std::string> unmatched_kind_warnings(const AttentionConfig& config,
                                                             const StartupPlan& plan);

ATTNKIT_API StartupPlan plan_startup(const ModelDescription& model, const StartupRequest& request,
                                     const Platform& platform, const Selector& selector);

}  // namespace attnkit
