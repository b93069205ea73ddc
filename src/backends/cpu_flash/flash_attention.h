#pragma once
// The CPU flash-attention kernels' entry points: pure functions over the kernel contract
// (attnkit/kernels/paged_attention_params.h), dispatched once per call to the SIMD target
// chosen by active_cpu_isa() (cpu_isa.h).

#include "attnkit/kernels/cpu_cache_update.h"
#include "attnkit/kernels/cpu_isa.h"
#include "attnkit/kernels/paged_attention_params.h"
#include "backends/cpu_flash/flash_plan.h"

namespace attnkit::cpu {

// The plan for `p` (its batch description, heads and mask) with `options`.
FlashPlan make_flash_plan(const PagedAttentionParams& p, const FlashPlanOptions& options = {});

// Computes attention for every query token of `p` as planned by `plan` (made for the same
// batch, heads and head sizes), using `ws` (grown to fit). Supported: q_dtype fp32/fp16/
// bf16; kv_dtype fp32/fp16/bf16/fp8 e4m3/e5m2; head_size and head_size_v multiples of 16.
// Inputs are trusted (the backend validates them); a violated precondition aborts.
void flash_attention(const PagedAttentionParams& p, const FlashPlan& plan, FlashWorkspace& ws);
// The same on an explicit target (which this CPU must run).
void flash_attention(const PagedAttentionParams& p, const FlashPlan& plan, FlashWorkspace& ws,
                     CpuIsa isa);

// Head sizes the kernels accept (both K and V): multiples of this.
inline constexpr int kHeadSizeMultiple = 16;

}  // namespace attnkit::cpu
