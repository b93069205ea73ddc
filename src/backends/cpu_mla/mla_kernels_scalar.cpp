// MLA kernels compiled for the portable fallback (baseline ISA). See mla_kernel_impl.h for the
// algorithm; attnkit/kernels/cpu_isa.h for how a target is chosen.

#include "kernels/cpu/isa_prelude.h"
#include "backends/cpu_mla/mla_attention.h"
#include "backends/cpu_mla/mla_plan.h"

namespace attnkit::cpu_mla::scalar_isa {
#include "kernels/cpu/simd_scalar.h"
// clang-format off
#include "backends/cpu_flash/flash_kernel_impl.h"
#include "backends/cpu_mla/mla_kernel_impl.h"
// clang-format on
}  // namespace attnkit::cpu_mla::scalar_isa

namespace attnkit::cpu_mla {

void mla_attention_scalar(const PagedAttentionParams& p, const MlaPlan& plan, MlaWorkspace& ws) {
  scalar_isa::run_mla(p, plan, ws);
}

}  // namespace attnkit::cpu_mla
