#pragma once
// CUDA_MLA's per-layer implementation: checks the device tensors, writes the step's latent
// vectors into the paged cache (CUDA_FLASH's cache-update kernel), fills the MLA form of
// PagedAttentionParams and launches the kernels over the builder's plan.

#include <memory>

#include "attnkit/backend/backend.h"

namespace attnkit::cuda_mla {

// Throws Error(kUnsupported) for a layer CUDA_MLA cannot run, and in builds without CUDA
// ("not built into this binary").
std::unique_ptr<AttentionImpl> make_cuda_mla_impl(const AttentionLayerParams& layer);

}  // namespace attnkit::cuda_mla
