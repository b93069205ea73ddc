#pragma once
// CPU_MLA's kernels: absorbed-weights MLA attention over a latent cache, a pure function over
// the kernel contract (attnkit/kernels/paged_attention_params.h with num_kv_heads = 1 and
// v_cache == k_cache), dispatched per call to the SIMD target CPU_FLASH's cpu_isa.h picks.
//
// Supported: q_dtype fp32/fp16/bf16; kv_dtype fp32/fp16/bf16/fp8 e4m3/e5m2 (k_scale
// dequantises both the scores and V); head_size and head_size_v multiples of 16 with
// head_size_v <= head_size; paged keys (block_table != nullptr); causal or not; a sliding
// window. Not supported (the backend never passes them): sinks, soft-cap, chunked-local.

#include <vector>

#include "attnkit/kernels/cpu_isa.h"
#include "attnkit/kernels/paged_attention_params.h"
#include "backends/cpu_mla/mla_plan.h"

namespace attnkit::cpu_mla {

// What the kernels run in besides their per-thread scratch. Per thread (cpu::thread_scratch,
// kept by each thread across calls), thread_floats floats: the item's fp32 queries
// [rows, head_size], output accumulators [rows, head_size_v], one key tile [lanes,
// head_size], probabilities [max(rows, 4), lanes] (one block of 4 rows is used), m, l [rows]
// (the bf16-dot kernels keep their bf16 queries, transposed and interleaved tile and bf16
// probabilities in the same regions, see mla_kernel_impl.h; the AMX kernels lay out at most
// mla_amx_layout(...).total floats, see mla_amx_layout.h). Here, grown on demand:
//   partial_out:    [plan.partial_rows, head_size_v] unnormalised split outputs;
//   partial_ml:     [plan.partial_rows, 2] running max m and sum l of each split row.
struct MlaWorkspace {
  std::vector<float> partial_out;
  std::vector<float> partial_ml;
  int64_t thread_floats = 0;
  void ensure(const MlaPlan& plan, int head_size, int head_size_v);
};

// Computes out for every query token of `p` as planned by `plan` (made for the same batch,
// heads and mask). Inputs are trusted (the backend validates them).
void mla_attention(const PagedAttentionParams& p, const MlaPlan& plan, MlaWorkspace& ws);
void mla_attention(const PagedAttentionParams& p, const MlaPlan& plan, MlaWorkspace& ws,
                   cpu::CpuIsa isa);

// Per-ISA entry points (mla_kernels_<isa>.cpp).
void mla_attention_scalar(const PagedAttentionParams& p, const MlaPlan& plan, MlaWorkspace& ws);
void mla_attention_avx2(const PagedAttentionParams& p, const MlaPlan& plan, MlaWorkspace& ws);
// bf16_dot: use avx512_bf16's dot products for bf16 queries and caches (the CPU has it).
void mla_attention_avx512(const PagedAttentionParams& p, const MlaPlan& plan, MlaWorkspace& ws,
                          bool bf16_dot);

// AMX tiles (bf16 queries and cache; head sizes multiples of 32; a CPU with AMX-BF16 whose OS
// granted the tile state, cpu::amx_bf16_enabled()).
void mla_attention_amx(const PagedAttentionParams& p, const MlaPlan& plan, MlaWorkspace& ws);

// Largest SIMD width any target uses (the key tile is this many keys at most).
inline constexpr int kMaxLanes = 16;

}  // namespace attnkit::cpu_mla
