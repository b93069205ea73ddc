#pragma once
// Static capabilities of the two CUDA backends. The same records drive validate() and the
// kernel choice in forward(), so a backend never claims what its kernels cannot run.

#include "attnkit/backend/capabilities.h"

namespace attnkit::cuda {

// CUDA_PAGED: CUDA-core kernels, any head size that is a multiple of 16 up to 256, fp8 KV.
const BackendCapabilities& paged_capabilities();
// CUDA_FLASH: tensor-core (mma.sync m16n8k16) kernels for head sizes 64, 128 and 256.
const BackendCapabilities& flash_capabilities();

// CUDA_FLASH reads K/V straight into the tensor cores, so the cache must hold the compute
// dtype: returns a reason when `kv_cache_dtype` resolves to anything else, else empty.
std::string flash_kv_dtype_reason(DType dtype, KvCacheDType kv_cache_dtype);

}  // namespace attnkit::cuda
