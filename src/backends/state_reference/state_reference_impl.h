#pragma once
// The state backends' builder (the common metadata, checked) and implementation.

#include <memory>
#include <string_view>

#include "attnkit/backend/backend.h"

namespace attnkit {

std::unique_ptr<MetadataBuilder> make_state_builder(const AttentionLayerParams& layer,
                                                    std::string_view backend);
std::unique_ptr<AttentionImpl> make_state_impl(const AttentionLayerParams& layer,
                                               std::string_view backend);

}  // namespace attnkit
