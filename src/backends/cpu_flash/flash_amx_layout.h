#pragma once
// Where CPU_FLASH's AMX kernel (flash_amx_impl.h) keeps its per-thread scratch, in floats
// from the start of the thread's region. Shared by the kernel and make_flash_plan() (which
// sizes the scratch for it), so it is plain C++. Every region starts on a 64-byte boundary.

#include <cstdint>

#include "kernels/cpu/amx_geometry.h"

namespace attnkit::cpu {

struct FlashAmxLayout {
  int64_t qt = 0;     // per KV head and 16-row group: Q^T as bf16 pairs [D / 2][16 rows]
  int64_t o = 0;      // per KV head: [padded rows][DV] fp32 accumulators
  int64_t m = 0;      // per KV head: [padded rows] exponent base of each row
  int64_t l = 0;      // per KV head: [padded rows] running sum
  int64_t vis = 0;    // [2][padded rows of one head] int32 first and end visible key per row
  int64_t st = 0;     // [2 row groups][kAmxPairStepKeys keys][16 rows] fp32 scores
  int64_t pa = 0;     // [2][kAmxPairStepKeys / 32][16 rows][32] bf16 probabilities (the P.V
                      // A tiles; the even/odd form uses [4 key tiles][2][16][32] of it)
  int64_t ks = 0;     // [kAmxPairStepKeys][D] bf16 staged key rows
  int64_t vs = 0;     // [kAmxPairStepKeys][DV] bf16 staged value rows
  int64_t vi = 0;     // [kAmxPairStepKeys / 32][DV / 32][2][16 pairs][32] bf16: V by key pairs
  int64_t total = 0;  // floats in all
};

// padded_rows: the rows of all the item's KV heads, each head's rounded up to a multiple of
// 16; head_rows: one head's, rounded up.
inline FlashAmxLayout flash_amx_layout(int64_t padded_rows, int64_t head_rows, int64_t head_size,
                                       int64_t head_size_v) {
  const auto up = [](int64_t floats) { return (floats + 15) / 16 * 16; };
  FlashAmxLayout s;
  int64_t at = 0;
  const auto take = [&](int64_t& offset, int64_t floats) {
    offset = at;
    at += up(floats);
  };
  take(s.qt, padded_rows * head_size / 2);
  take(s.o, padded_rows * head_size_v);
  take(s.m, padded_rows);
  take(s.l, padded_rows);
  take(s.vis, 2 * head_rows);
  take(s.st, 2 * int64_t{kAmxPairStepKeys} * kAmxRows);
  take(s.pa, 2 * int64_t{kAmxPairStepKeys} * kAmxRows / 2);
  take(s.ks, int64_t{kAmxPairStepKeys} * head_size / 2);
  take(s.vs, int64_t{kAmxPairStepKeys} * head_size_v / 2);
  take(s.vi, int64_t{kAmxPairStepKeys} * head_size_v / 2);
  s.total = at;  // the thread's scratch starts 64-byte aligned (cpu::thread_scratch)
  return s;
}

}  // namespace attnkit::cpu
