// The one explicit list of built-in backends (no static-initialiser registration).
// Each backend folder exposes `std::unique_ptr<AttentionBackend> make_<name>_backend();`
// in its header; add its include and ONE line to the list below, e.g.
//   #include "backends/reference/reference_backend.h"
#include "backends/state_reference/state_reference_backend.h"
//       {"REFERENCE", make_reference_backend},
// The order here is the order `attnkit backends` lists them; selection priority is
// decided per platform by the selector (src/selector/priority.cpp). "CUSTOM" is reserved
// for users (see BackendRegistry) and must not appear here.
#include <vector>

#include "attnkit/registry/registry.h"
#include "backends/cpu_flash/cpu_flash_backend.h"
#include "backends/cpu_mla/cpu_mla_backend.h"
#include "backends/cuda_flash/cuda_flash_backend.h"
#include "backends/cuda_mla/cuda_mla_backend.h"
#include "backends/cuda_paged/cuda_paged_backend.h"
#include "backends/reference/reference_backend.h"

namespace attnkit {

std::span<const BuiltinBackend> builtin_backends() {
  // One backend per line (clang-format would pack them into columns).
  // clang-format off
  static const std::vector<BuiltinBackend> kBuiltinBackends = {
      {"REFERENCE", make_reference_backend},
      {"CPU_FLASH", make_cpu_flash_backend},
      {"CPU_MLA", make_cpu_mla_backend},
      {"CUDA_FLASH", make_cuda_flash_backend},
      {"CUDA_PAGED", make_cuda_paged_backend},
      {"CUDA_MLA", make_cuda_mla_backend},
      {"MAMBA1", make_mamba1_backend},
      {"MAMBA2", make_mamba2_backend},
      {"GDN_ATTN", make_gdn_attn_backend},
      {"KDA_ATTN", make_kda_attn_backend},
      {"SHORT_CONV", make_short_conv_backend},
      {"LINEAR", make_linear_backend},
      {"RG_LRU", make_rg_lru_backend},
  };
  // clang-format on
  return kBuiltinBackends;
}

}  // namespace attnkit
