#pragma once
// The REFERENCE backend's plan and implementation (internal to the backend folder).

#include <memory>

#include "attnkit/backend/backend.h"

namespace attnkit {

// A builder for a KV-cache group whose layers all have `layer` shapes.
std::unique_ptr<MetadataBuilder> make_reference_builder(const AttentionLayerParams& layer);
std::unique_ptr<AttentionImpl> make_reference_impl(const AttentionLayerParams& layer);

}  // namespace attnkit
