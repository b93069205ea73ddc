#pragma once
// The REFERENCE backend's plan and implementation (internal to the backend folder).

#include <memory>

#include "attnkit/backend/backend.h"

namespace attnkit {

std::unique_ptr<MetadataBuilder> make_reference_builder();
std::unique_ptr<AttentionImpl> make_reference_impl(const AttentionLayerParams& layer);

}  // namespace attnkit
