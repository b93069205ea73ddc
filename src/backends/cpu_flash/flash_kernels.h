#pragma once
// The per-ISA entry points (one translation unit each). Callers go through
// flash_attention.h, which picks one with active_cpu_isa().

#include "attnkit/kernels/paged_attention_params.h"
#include "backends/cpu_flash/flash_plan.h"

namespace attnkit::cpu {

void flash_attention_scalar(const PagedAttentionParams& p, const FlashPlan& plan,
                            FlashWorkspace& ws);
void flash_attention_avx2(const PagedAttentionParams& p, const FlashPlan& plan, FlashWorkspace& ws);
void flash_attention_avx512(const PagedAttentionParams& p, const FlashPlan& plan,
                            FlashWorkspace& ws, bool bf16_dot);
// AMX tiles: bf16 queries and cache, head sizes multiples of 32, cpu::amx_bf16_enabled();
// items of few rows per KV head take the avx512 bf16 kernels (bf16_dot: with dot products).
void flash_attention_amx(const PagedAttentionParams& p, const FlashPlan& plan, FlashWorkspace& ws,
                         bool bf16_dot);

}  // namespace attnkit::cpu
