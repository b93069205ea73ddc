#pragma once
// CUDA_FLASH's in-kernel split-KV merge (see split_kv_merge_if_last): the last CTA of a
// split group merges the group's partial results (DevicePlan layout, cuda_kernels.h), so
// no combine launch follows the attention launch.

#include <cstdint>

#include "backends/cuda_flash/flash_kernels.h"
#include "backends/cuda_flash/flash_trace.cuh"
#include "kernels/cuda/cuda_plan.h"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/mma_primitives.cuh"

namespace attnkit::cuda {

// The few PagedAttentionParams fields the merge reads, passed by value: a reference to
// the kernel's parameter block would make the compiler copy all of it to local memory.
struct SplitMergeArgs {
  void* out;
  const float* sinks;
  int64_t o_token_stride, o_head_stride;
  int num_heads, num_kv_heads;
};

// The steps of split_kv_merge_if_last, inlined into it.
namespace split_merge_steps {

// Each row's partial slot (split k adds k * num_heads), output offset and query head, for
// the merging CTA's table in shared memory (one thread per row).
__device__ __forceinline__ void fill_row_table(const CudaWorkItem& item, int kv_head, int group,
                                               int ns, int num_heads, int64_t o_token_stride,
                                               int64_t o_head_stride, int tid, int64_t* s_slot,
                                               int64_t* s_out, int* s_head) {
  const int token = (item.row_begin + tid) / group;
  const int head = kv_head * group + (item.row_begin + tid) % group;
  s_slot[tid] =
      (static_cast<int64_t>(item.partial_base) + static_cast<int64_t>(token) * ns) * num_heads +
      head;
  s_out[tid] = (item.q_start + token) * o_token_stride + head * o_head_stride;
  s_head[tid] = head;
}

// One thread counts this CTA's split done (acq_rel: releases the CTA's partial writes; the
// last CTA acquires the others'), resets the counter when it was the group's last, and
// publishes that in *s_last.
__device__ __forceinline__ void count_split_done(const CudaWorkItem& item, int kv_head,
                                                 int num_kv_heads, unsigned* split_counters,
                                                 int* s_last) {
  unsigned* counter = split_counters + item.split_group * num_kv_heads + kv_head;
  unsigned done;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;\n"
               : "=r"(done)
               : "l"(counter)
               : "memory");
  const bool last = done + 1 == static_cast<unsigned>(item.num_splits);
  if (last) *counter = 0u;
  *s_last = last ? 1 : 0;
}

// Requests every row's partial rows (a warp per split, lanes along the 16-byte pieces,
// cp.async.cg reads L2; only when `staged`) and log2-sum-exps (cp.async.ca: L1 holds none of
// them after the acquire) into shared memory; every row's are requested before any is waited
// for. Not committed.
template <typename T, typename C>
__device__ __forceinline__ void stage_partials(const T* partial, const float* partial_lse,
                                               const int64_t* s_slot, float* s_lse, T* s_part,
                                               int rows, int ns, int num_heads, bool staged,
                                               int lane, int warp, int tid) {
  constexpr int D = C::D, kThreads = C::kMergeThreads, kWarps = kThreads / 32;
#pragma unroll 1
  for (int r = 0; r < rows; ++r) {
    const int64_t slot0 = s_slot[r];
    if (staged && lane < D / 8) {
      const T* src = partial + slot0 * D + lane * 8;
#pragma unroll 1
      for (int k = warp; k < ns; k += kWarps) {
        cp_async_16(s_part + (r * ns + k) * D + lane * 8,
                    src + static_cast<int64_t>(k) * num_heads * D, 16);
      }
    }
    // Not a load and a store: the store would wait for each row's load in turn.
#pragma unroll 1
    for (int k = tid; k < ns; k += kThreads) {
      cp_async_4(s_lse + r * ns + k, partial_lse + slot0 + static_cast<int64_t>(k) * num_heads);
    }
  }
}

// acc += w * (the 8 T of `packed`).
template <typename T>
__device__ __forceinline__ void add8(float (&acc)[8], float w, uint4 packed) {
  const float2 x = unpack2<T>(packed.x), y = unpack2<T>(packed.y);
  const float2 z = unpack2<T>(packed.z), u = unpack2<T>(packed.w);
  acc[0] += w * x.x;
  acc[1] += w * x.y;
  acc[2] += w * y.x;
  acc[3] += w * y.y;
  acc[4] += w * z.x;
  acc[5] += w * z.y;
  acc[6] += w * u.x;
  acc[7] += w * u.y;
}

// Outputs: 8 elements of one row per lane group; with few rows (decode) `ways` adjacent
// lanes share a (row, chunk) and take every ways-th split, then add up by shuffles, so
// that every thread has work. Each thread weighs its splits itself (the row's maximum M
// found by the row's lanes together, its share of the sum added up like the outputs): no
// weights pass and barrier of their own, less code for the merging CTA to fetch.
//   out = sum_k w_k o_k / (sum_k w_k + exp2(sink - M)),  w_k = exp2(lse_k - M)
template <typename T, typename C>
__device__ __forceinline__ void merge_rows(void* out, const float* sinks, const T* partial,
                                           const int64_t* s_slot, const int64_t* s_out,
                                           const int* s_head, const float* s_lse, const T* s_part,
                                           int rows, int ns, int num_heads, int ways_log2,
                                           bool staged, int lane, int tid) {
  constexpr int D = C::D, kChunks = C::kChunks, kThreads = C::kMergeThreads;
  const int ways = 1 << ways_log2;
  const int total = rows * kChunks * ways;
  // A row's kChunks * ways lanes are consecutive (a power of two): lanes in groups of
  // `row_lanes` share one row and find its maximum together.
  const int row_lanes = min(32, kChunks << ways_log2);
#pragma unroll 1
  for (int base = 0; base < total; base += kThreads) {  // uniform: every lane shuffles
    const int i = base + tid;
    const int pair = i >> ways_log2, way = i & (ways - 1);
    const int r = pair / kChunks, c = pair % kChunks;  // kChunks: a power of two
    const float* lse = s_lse + min(r, rows - 1) * ns;  // lanes past total: any row
    float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0}, sum = 0.0f, ref = -INFINITY, sink = -INFINITY;
#pragma unroll 1
    for (int k = lane & (row_lanes - 1); k < ns; k += row_lanes) ref = fmaxf(ref, lse[k]);
#pragma unroll 1
    for (int o = row_lanes / 2; o > 0; o /= 2) {
      ref = fmaxf(ref, __shfl_xor_sync(0xffffffffu, ref, o));
    }
    if (sinks != nullptr && i < total) sink = sinks[s_head[r]] * kLog2e;
    ref = fmaxf(ref, sink);
    // Every split wrote all its rows (zeros where it saw no key): no guard on the loads.
    if (i < total && staged) {
#pragma unroll 1
      for (int k = way; k < ns; k += ways) {
        const float w = safe_exp2(lse[k], ref);
        sum += w;
        add8<T>(acc, w, *reinterpret_cast<const uint4*>(s_part + (r * ns + k) * D + c * 8));
      }
    } else if (i < total) {
      // Partials past shared memory's size: straight from L2, four splits in flight.
      const T* row_src = partial + s_slot[r] * D + c * 8;
#pragma unroll 4
      for (int k = way; k < ns; k += ways) {
        const float w = safe_exp2(lse[k], ref);
        sum += w;
        add8<T>(acc, w,
                __ldcg(reinterpret_cast<const uint4*>(row_src +
                                                      static_cast<int64_t>(k) * num_heads * D)));
      }
    }
#pragma unroll 1
    for (int o = 1; o < ways; o *= 2) {
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[e] += __shfl_xor_sync(0xffffffffu, acc[e], o);
      sum += __shfl_xor_sync(0xffffffffu, sum, o);
    }
    if (i >= total || way != 0) continue;
    const float denom = sum + safe_exp2(sink, ref);
    const float inv = denom > 0.0f ? 1.0f / denom : 0.0f;
    uint4 packed;
    packed.x = pack2<T>(acc[0] * inv, acc[1] * inv);
    packed.y = pack2<T>(acc[2] * inv, acc[3] * inv);
    packed.z = pack2<T>(acc[4] * inv, acc[5] * inv);
    packed.w = pack2<T>(acc[6] * inv, acc[7] * inv);
    *reinterpret_cast<uint4*>(static_cast<T*>(out) + s_out[r] + c * 8) = packed;
  }
}

}  // namespace split_merge_steps

// Split-KV: the CTA that finishes the last split of its (split group, KV head) merges
// all of them, so no combine launch follows. Classic last-block pattern: after a CTA
// barrier one acq_rel atomic per CTA counts (releasing the CTA's partial writes; the last
// CTA acquires the others'), and the last CTA reads the partials past L1. It resets the
// counter for the next forward.
// The merge itself: every (row, split)'s partial row and log2-sum-exp are copied into
// shared memory first, all at once, then each thread makes 8 output elements of a row from
// its share of the splits, weighing them itself; not one chain of dependent L2 reads per
// split.
// The partial rows are in the compute dtype T (cuda_kernels.h). When the group's rows fit
// in shared memory (decode, e.g. 4 GQA rows x 32 splits x head size 128: 32 KiB) they are
// all requested at once with cp.async, together with the lse loads, instead of one round
// trip per batch of four splits (or per row, had the lse been loaded into registers and
// then stored): this is on the critical path of a long single-request decode step.
//   out = sum_k w_k o_k / (sum_k w_k + exp2(sink - M)),  w_k = exp2(lse_k - M)
// Not inlined, and re-reading the work item, so that none of this is live (in registers)
// during the main loop of the kernel.
// smem is the kernel's dynamic shared memory (C::kMergeSmemBytes of it), free after its
// epilogue: the last-CTA flag, each row's partial slot, output offset and query head (a
// table every CTA fills before the counter, while the code is warm), then the log2-sum-exps
// [rows][num_splits] fp32, then (when they fit) the partial rows [rows][num_splits][D] of T.
// C::kMergeThreads threads from C::kMergeThreadBase on run it, synchronised by C::merge_sync().
template <typename T, typename C>
__device__ __noinline__ void split_kv_merge_if_last(SplitMergeArgs p, const CudaWorkItem* item_ptr,
                                                    int kv_head, const float* partial_o,
                                                    const float* partial_lse,
                                                    unsigned* split_counters, unsigned char* smem) {
  using namespace split_merge_steps;
  constexpr int D = C::D, kRows = C::kRows, kChunks = C::kChunks, kThreads = C::kMergeThreads;
  // Shared memory: flag (16 bytes), per row its partial slot, output offset and head, then
  // log2-sum-exps and partials.
  constexpr int kHeader = 16 + ((20 * kRows + 15) / 16) * 16;
  static_assert(kHeader + 4 * kRows * PlanShape{}.max_splits <= C::kMergeSmemBytes,
                "the merge keeps one log2-sum-exp per (row, split) in shared memory");
  static_assert(kThreads % 32 == 0, "the merge runs on whole warps");
  static_assert(kRows <= kThreads, "one thread per row fills the row table");
  static_assert(D / 8 <= 32, "a warp's lanes cover a partial row's 16-byte pieces");
  const CudaWorkItem item = *item_ptr;
  const int tid = static_cast<int>(threadIdx.x) - C::kMergeThreadBase;
  const int lane = tid % 32, warp = tid / 32;
  // Everything up to the counter runs in every CTA of the launch (its code is warm in
  // every SM's instruction cache); what follows runs once per split group, on whichever SM
  // finishes last, so its instructions are fetched from L2 line by line (128 bytes, a
  // round trip each). Hence the set-up here, no divisions past the counter, and rolled
  // loops there (fetched once, then hit) unless memory latency needs iterations in flight.
  const int group = p.num_heads / p.num_kv_heads;
  const int ns = item.num_splits;
  const int rows = min(item.row_end - item.row_begin, kRows);
  const size_t lse_bytes = (4u * static_cast<size_t>(rows * ns) + 15u) & ~size_t{15};
  const bool staged =
      kHeader + lse_bytes + sizeof(T) * static_cast<size_t>(rows * ns) * D <= C::kMergeSmemBytes;
  int ways_log2 = 0;  // 8 output elements per lane group of 2^ways_log2 lanes (merge_rows)
  while (ways_log2 < 3 && rows * kChunks * (2 << ways_log2) <= kThreads) ++ways_log2;
  int64_t* s_slot = reinterpret_cast<int64_t*>(smem + 16);             // [rows] split 0's slot row
  int64_t* s_out = reinterpret_cast<int64_t*>(smem + 16 + 8 * kRows);  // [rows] output offset
  int* s_head = reinterpret_cast<int*>(smem + 16 + 16 * kRows);        // [rows] query head
  float* s_lse = reinterpret_cast<float*>(smem + kHeader);             // [rows][ns]
  T* s_part = reinterpret_cast<T*>(smem + kHeader + lse_bytes);        // [rows][ns][D]
  const T* partial = reinterpret_cast<const T*>(partial_o);

  // The CTA's partial writes happen before thread 0's release (the barrier), and the last
  // CTA's reads after its acquire (the barrier below): one acq_rel atomic per CTA, no
  // fence in every thread. Shared memory is free once the barrier has passed; the row table
  // is filled here, where the code is warm.
  C::merge_sync();
  int* s_last = reinterpret_cast<int*>(smem);
  if (tid < rows) {
    fill_row_table(item, kv_head, group, ns, p.num_heads, p.o_token_stride, p.o_head_stride, tid,
                   s_slot, s_out, s_head);
  }
  if (tid == 0) count_split_done(item, kv_head, p.num_kv_heads, split_counters, s_last);
  C::merge_sync();
  flash_trace(kTraceCounted, tid == 0);
  if (*s_last == 0) return;

  stage_partials<T, C>(partial, partial_lse, s_slot, s_lse, s_part, rows, ns, p.num_heads, staged,
                       lane, warp, tid);
  cp_async_commit();
  flash_trace(kTraceMergeIssued, tid == 0);
  cp_async_wait<0>();
  C::merge_sync();
  flash_trace(kTraceMergeLoaded, tid == 0);
  merge_rows<T, C>(p.out, p.sinks, partial, s_slot, s_out, s_head, s_lse, s_part, rows, ns,
                   p.num_heads, ways_log2, staged, lane, tid);
  flash_trace(kTraceMerged, tid == 0);
}

}  // namespace attnkit::cuda
