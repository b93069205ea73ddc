#pragma once
// The REFERENCE backend's plan and implementation (internal to the backend folder).

#include <memory>

#include "attnkit/backend/backend.h"

namespace attnkit {

// Throws Error naming the first inconsistent field of `common` (sizes of its arrays,
// offsets that are not non-decreasing, negative lengths).
void validate_common_metadata(const CommonAttentionMetadata& common);

std::unique_ptr<MetadataBuilder> make_reference_builder();
std::unique_ptr<AttentionImpl> make_reference_impl(const AttentionLayerParams& layer);

}  // namespace attnkit
