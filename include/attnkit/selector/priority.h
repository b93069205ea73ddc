#pragma once
// Which backends automatic selection tries, in which order, on a platform.
//
//   CPU:  CPU_FLASH, REFERENCE
//   CUDA: CUDA_MLA (MLA layers only), CUDA_FLASH, CUDA_PAGED   (REFERENCE never on CUDA)
//   state layers (mamba kind), any platform: MAMBA1, MAMBA2, GDN_ATTN, KDA_ATTN,
//         SHORT_CONV, LINEAR, RG_LRU (each serves one layer type, on the CPU)
// followed by every backend registered at run time under a name of its own (not a built-in
// name, not one of the names above) that declares this platform kind, in registration
// order. Names that are not registered are skipped.

#include <string>
#include <vector>

#include "attnkit/backend/backend.h"
#include "attnkit/export.h"
#include "attnkit/registry/registry.h"

namespace attnkit {

// The built-in priority list of a platform for a layer, before filtering by the registry.
ATTNKIT_API std::vector<std::string> builtin_priority(PlatformKind platform, bool use_mla);
// The built-in state backends, in priority order.
ATTNKIT_API std::vector<std::string> builtin_state_priority();

// The candidates automatic selection walks for `config` on `platform`, best first.
ATTNKIT_API std::vector<std::string> priority_list(const BackendRegistry& registry,
                                                   const Platform& platform,
                                                   const SelectorConfig& config);

// Why `backend` cannot run on `platform` at all, whatever the layer: wrong platform kind,
// compute capability outside its range, and (when `include_binary`) why this binary
// cannot run its kernels there. Empty = it can.
ATTNKIT_API std::vector<std::string> platform_reasons(const AttentionBackend& backend,
                                                      const Platform& platform,
                                                      bool include_binary = true);

}  // namespace attnkit
