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

// Whether the avx512 target runs the AMX tile kernels (flash_amx_impl.h) for these
// dtypes and head sizes: bf16 queries and cache, head sizes multiples of 32, and
// amx_bf16_enabled(). They take the plan's items of 8 or more rows per KV head.
bool amx_tiles_take(ScalarType q_dtype, ScalarType kv_dtype, int head_size, int head_size_v);

// Prefill query tiles (FlashPlanOptions::rows_per_tile) where the AMX tile kernels run: each
// key tile is read once for 8 row groups instead of 2 (prefill 2048 x1.35 and the mixed step
// x1.33 against 32-row tiles on an Intel Xeon, bench/results/cpu_flash.md).
inline constexpr int kAmxRowsPerTile = 128;
// Prefill query tiles (FlashPlanOptions::rows_per_tile) where the AVX2 outer-product kernel
// runs (flash_outer_product_impl.h): each step's K and V conversion serves 128 rows instead
// of 32. On an Intel Xeon (AVX2 kernels forced) 64 rows ran x1.07-1.10 against 32 and 128
// x1.05-1.09 against 64 on the benchmark's prefill and mixed shapes; 256 gained 2-5% more
// but halves the items a prompt gives the threads (bench/results/cpu_flash_avx2.md).
inline constexpr int kOuterRowsPerTile = 128;

// Head sizes the kernels accept (both K and V): multiples of this.
inline constexpr int kHeadSizeMultiple = 16;

}  // namespace attnkit::cpu
