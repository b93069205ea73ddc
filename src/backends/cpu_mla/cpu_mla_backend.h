#pragma once
// CPU_MLA: DeepSeek-style latent attention (MLA, absorbed-weights form) on the CPU. The
// cache holds one latent vector per token; all query heads of a request share it, so the
// kernels process every head of a request together and read each latent row once.

#include <memory>

#include "attnkit/backend/backend.h"

namespace attnkit {

std::unique_ptr<AttentionBackend> make_cpu_mla_backend();

// The capabilities CPU_MLA declares (exactly what its tests prove).
const BackendCapabilities& cpu_mla_capabilities();

}  // namespace attnkit
