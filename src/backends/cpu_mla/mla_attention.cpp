#include "backends/cpu_mla/mla_attention.h"

#include <algorithm>

#include "attnkit/core/error.h"
#include "backends/cpu_mla/mla_amx_layout.h"

namespace attnkit::cpu_mla {

void MlaWorkspace::ensure(const MlaPlan& plan, int head_size, int head_size_v) {
  const int64_t rows = plan.max_rows;
  thread_floats = rows * head_size + rows * head_size_v + int64_t{kMaxLanes} * head_size +
                  std::max<int64_t>(rows, 4) * kMaxLanes + 2 * rows + 64;
  const int64_t amx_groups = (rows + kAmxRows - 1) / kAmxRows;
  thread_floats = std::max(thread_floats, mla_amx_layout(amx_groups, head_size, head_size_v).total);
  const auto partial = static_cast<size_t>(plan.partial_rows);
  if (partial_out.size() < partial * static_cast<size_t>(head_size_v)) {
    partial_out.resize(partial * static_cast<size_t>(head_size_v));
  }
  if (partial_ml.size() < 2 * partial) partial_ml.resize(2 * partial);
}

void mla_attention(const PagedAttentionParams& p, const MlaPlan& plan, MlaWorkspace& ws) {
  mla_attention(p, plan, ws, cpu::active_cpu_isa());
}

void mla_attention(const PagedAttentionParams& p, const MlaPlan& plan, MlaWorkspace& ws,
                   cpu::CpuIsa isa) {
  if (plan.items.empty()) return;
  ATTNKIT_CHECK(p.num_kv_heads == 1 && p.num_heads == plan.num_heads, "plan made for other heads");
  ATTNKIT_CHECK(p.head_size % 16 == 0 && p.head_size_v % 16 == 0 && p.head_size_v <= p.head_size,
                "MLA head sizes must be multiples of 16 with head_size_v <= head_size");
  ATTNKIT_CHECK(p.block_table != nullptr && p.block_size > 0, "MLA kernels read a paged cache");
  ATTNKIT_CHECK(p.sinks == nullptr && p.soft_cap == 0.0f && p.chunk_size == 0,
                "sinks, soft-cap and chunked-local are not MLA kernel features");
  ws.ensure(plan, p.head_size, p.head_size_v);
  // Read on every target, so a bad ATTNKIT_CPU_AMX is an error wherever CPU_MLA runs.
  const bool amx = cpu::amx_bf16_enabled();
  switch (isa) {
#if defined(__x86_64__) || defined(__i386__)
    case cpu::CpuIsa::kAvx512:
      if (p.q_dtype == ScalarType::kBFloat16 && p.kv_dtype == ScalarType::kBFloat16 &&
          p.head_size % 32 == 0 && p.head_size_v % 32 == 0 && amx) {
        return mla_attention_amx(p, plan, ws);
      }
      return mla_attention_avx512(p, plan, ws, cpu::avx512_bf16_dot_enabled());
    case cpu::CpuIsa::kAvx2:
      return mla_attention_avx2(p, plan, ws);
#endif
    default:
      return mla_attention_scalar(p, plan, ws);
  }
}

}  // namespace attnkit::cpu_mla
