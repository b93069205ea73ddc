#pragma once
// CUDA_MLA: DeepSeek-style latent attention (MLA, absorbed-weights form) on sm_80+ with
// tensor cores: decode with the query heads packed into the mma M dimension, split-KV
// over long contexts, prefill and mixed batches. Registered in every build; without CUDA
// its binary_reason() says the kernels are not built into this binary and
// make_builder()/make_impl() throw Error(kUnsupported).

#include <memory>

#include "attnkit/backend/backend.h"

namespace attnkit {

std::unique_ptr<AttentionBackend> make_cuda_mla_backend();

// The capabilities CUDA_MLA declares (exactly what its GPU conformance tests prove).
const BackendCapabilities& cuda_mla_capabilities();

}  // namespace attnkit
