#include "backends/cpu_flash/flash_attention.h"

#include <span>

#include "attnkit/core/error.h"
#include "backends/cpu_flash/flash_kernels.h"

namespace attnkit::cpu {
namespace {

void check_contract(const PagedAttentionParams& p, const FlashPlan& plan) {
  ATTNKIT_CHECK(p.num_heads == plan.num_heads && p.num_kv_heads == plan.num_kv_heads &&
                    p.head_size == plan.head_size && p.head_size_v == plan.head_size_v,
                "plan made for other shapes");
  ATTNKIT_CHECK(p.head_size % kHeadSizeMultiple == 0 && p.head_size_v % kHeadSizeMultiple == 0,
                "head sizes must be multiples of 16");
  ATTNKIT_CHECK(p.block_table != nullptr ? p.block_size > 0 : p.kv_start_loc != nullptr,
                "neither paged nor contiguous keys");
}

}  // namespace

FlashPlan make_flash_plan(const PagedAttentionParams& p, const FlashPlanOptions& options) {
  return make_flash_plan(std::span<const int32_t>(p.query_start_loc, p.num_seqs + 1),
                         std::span<const int32_t>(p.seq_lens, p.num_seqs), p.num_heads,
                         p.num_kv_heads, p.head_size, p.head_size_v, mask_rule(p), options);
}

bool amx_tiles_take(ScalarType q_dtype, ScalarType kv_dtype, int head_size, int head_size_v) {
  return q_dtype == ScalarType::kBFloat16 && kv_dtype == ScalarType::kBFloat16 &&
         head_size % 32 == 0 && head_size_v % 32 == 0 && amx_bf16_enabled();
}

void flash_attention(const PagedAttentionParams& p, const FlashPlan& plan, FlashWorkspace& ws) {
  flash_attention(p, plan, ws, active_cpu_isa());
}

void flash_attention(const PagedAttentionParams& p, const FlashPlan& plan, FlashWorkspace& ws,
                     CpuIsa isa) {
  check_contract(p, plan);
  if (plan.items.empty()) return;
  ws.ensure(plan);
  // Read on every target, so a bad ATTNKIT_CPU_AMX is an error wherever CPU_FLASH runs.
  const bool amx = amx_bf16_enabled();
  switch (isa) {
#if defined(__x86_64__) || defined(__i386__)
    case CpuIsa::kAvx512:
      if (amx && amx_tiles_take(p.q_dtype, p.kv_dtype, p.head_size, p.head_size_v)) {
        return flash_attention_amx(p, plan, ws, avx512_bf16_dot_enabled());
      }
      return flash_attention_avx512(p, plan, ws, avx512_bf16_dot_enabled());
    case CpuIsa::kAvx2:
      return flash_attention_avx2(p, plan, ws);
#endif
    default:
      return flash_attention_scalar(p, plan, ws);
  }
}

}  // namespace attnkit::cpu
