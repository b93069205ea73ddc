#pragma once
// Factories of the two built-in CUDA backends (listed in src/registry/builtin_backends.cpp).
// Both are registered in every build; without CUDA their binary_reason() says "not built
// into this binary" and make_builder()/make_impl() throw Error(kUnsupported).

#include <memory>

#include "attnkit/backend/backend.h"

namespace attnkit {

// CUDA_PAGED: paged attention on CUDA cores; broad features (fp8 KV, any head size that is
// a multiple of 16 up to 256, windows, chunks, sinks, soft-cap, every attention type).
std::unique_ptr<AttentionBackend> make_cuda_paged_backend();
// CUDA_FLASH: tensor-core flash attention over the paged KV cache (head sizes 64/128/256).
std::unique_ptr<AttentionBackend> make_cuda_flash_backend();

}  // namespace attnkit
