#pragma once
// The per-layer implementation shared by CUDA_PAGED and CUDA_FLASH: validates the device
// tensors, writes the fresh K/V into the paged cache, fills PagedAttentionParams and
// launches the family's kernels over the plan the metadata builder made.

#include <memory>

#include "attnkit/backend/backend.h"
#include "backends/cuda/cuda_metadata.h"

namespace attnkit::cuda {

// CUDA builds only; elsewhere throws Error(kUnsupported, "... not built into this binary").
std::unique_ptr<AttentionImpl> make_cuda_attention_impl(KernelFamily family,
                                                        const AttentionLayerParams& layer);

}  // namespace attnkit::cuda
