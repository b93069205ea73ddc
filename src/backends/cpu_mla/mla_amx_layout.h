#pragma once
// Where CPU_MLA's AMX kernel (mla_amx_impl.h) keeps its per-thread scratch, in floats from
// the start of the thread's region. Shared by the kernel and MlaWorkspace::ensure(), so it
// is plain C++ (no SIMD). Every region starts on a 64-byte boundary (tile rows are 64
// bytes).

#include <cstdint>

#include "kernels/cpu/amx_geometry.h"

namespace attnkit::cpu_mla {

using cpu::kAmxPairStepKeys;
using cpu::kAmxRows;
using cpu::kAmxStepKeys;

struct MlaAmxLayout {
  int64_t qt = 0;     // [groups][D / 2 pairs][16 rows] bf16 pairs: Q^T, the score tiles' B
  int64_t o = 0;      // [groups * 16][DV] fp32 output accumulators
  int64_t st = 0;     // [2 groups][kAmxPairStepKeys][16] fp32 scores (lane = row)
  int64_t pa = 0;     // [2 groups][kAmxPairStepKeys / 32][16 rows][32] bf16 probabilities
                      // (the P.V tiles' A; the even/odd form uses [4][2][16][32] of it)
  int64_t ks = 0;     // [kAmxPairStepKeys][D] bf16 staged key rows (tiles that cross a page)
  int64_t vi = 0;     // [kAmxPairStepKeys / 32][DV / 32][2][16 pairs][32] bf16: V by key pairs
  int64_t m = 0;      // [groups * 16] exponent base of each row's probabilities
  int64_t l = 0;      // [groups * 16] running sum of each row's probabilities
  int64_t vis = 0;    // [2][groups * 16] int32 first and end visible key of each row
  int64_t total = 0;  // floats in all
};

inline MlaAmxLayout mla_amx_layout(int64_t groups, int64_t head_size, int64_t head_size_v) {
  const auto up = [](int64_t floats) { return (floats + 15) / 16 * 16; };
  const int64_t rows = groups * kAmxRows;
  MlaAmxLayout s;
  int64_t at = 0;
  const auto take = [&](int64_t& offset, int64_t floats) {
    offset = at;
    at += up(floats);
  };
  take(s.qt, groups * head_size * kAmxRows / 2);
  take(s.o, rows * head_size_v);
  take(s.st, 2 * int64_t{kAmxPairStepKeys} * kAmxRows);
  take(s.pa, 2 * int64_t{kAmxPairStepKeys} * kAmxRows / 2);
  take(s.ks, int64_t{kAmxPairStepKeys} * head_size / 2);
  take(s.vi, int64_t{kAmxPairStepKeys} * head_size_v / 2);
  take(s.m, rows);
  take(s.l, rows);
  take(s.vis, 2 * rows);
  s.total = at + 16;  // room to align the region's start to 64 bytes
  return s;
}

}  // namespace attnkit::cpu_mla
