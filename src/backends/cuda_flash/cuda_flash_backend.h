#pragma once
// CUDA_FLASH's factory (listed in src/registry/builtin_backends.cpp). Registered in every
// build; without CUDA its binary_reason() says "not built into this binary" and
// make_builder()/make_impl() throw Error(kUnsupported).

#include <memory>

#include "attnkit/backend/backend.h"

namespace attnkit {

// Tensor-core flash attention over the paged KV cache (head sizes 64/128/256).
std::unique_ptr<AttentionBackend> make_cuda_flash_backend();

}  // namespace attnkit
