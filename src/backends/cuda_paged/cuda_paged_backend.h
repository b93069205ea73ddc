#pragma once
// CUDA_PAGED's factory (listed in src/registry/builtin_backends.cpp). Registered in every
// build; without CUDA its binary_reason() says "not built into this binary" and
// make_builder()/make_impl() throw Error(kUnsupported).

#include <memory>

#include "attnkit/backend/backend.h"

namespace attnkit {

// Paged attention on CUDA cores; broad features (fp8 KV, any head size that is a multiple
// of 16 up to 256, windows, chunks, sinks, soft-cap, every attention type).
std::unique_ptr<AttentionBackend> make_cuda_paged_backend();

}  // namespace attnkit
