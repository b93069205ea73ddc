#pragma once
// CUDA_MLA's attention kernel: absorbed-weights MLA over the paged latent cache with
// mma.sync m16n8k16 (fp32 accumulation). Geometry, warp roles and the shared-memory layout
// are described in mla_geometry.h; the kernel contract in paged_attention_params.h
// (num_kv_heads 1, head_size 576, head_size_v 512, V = the first 512 latent values).
//
// One CTA runs one CudaWorkItem (cuda_plan.h): packed rows [row_begin, row_end) of request
// `seq` against keys [kv_begin, kv_end). With num_splits > 1 it writes its normalised
// partial O and log2-sum-exp to the split-KV workspace, merged by split_kv_combine.cuh.
//
// KV dtypes: a 16-bit cache equal to the compute dtype is copied into shared memory with
// cp.async (one block-table lookup per key, kStages deep). An fp8 e4m3 cache is loaded
// into registers kFp8Depth tiles ahead (8 bytes per load) and, at the end of the tile
// before its own, converted exactly to the compute dtype (every e4m3 value is
// representable in fp16 and bf16) on the store into a free shared-memory stage (of two, or
// of three in the pipelined loop); so the conversion needs no barrier of its own and the
// loads have kFp8Depth whole tiles of work to land. Its scale is applied once, to the scores (scale
// * k_scale) and to the output (times v_scale, which the contract sets to k_scale), instead of to
// every element.
//
// Tile loop: S phase, barrier, softmax, barrier, PV phase, per tile (plus the in-place
// add's barrier); or, for configurations with kOverlap, PV(t) and S(t + 1) between the same
// two barriers over three stages (see the comment at that loop).

#include <cuda_fp8.h>

#include <type_traits>

#include "backends/cuda_mla/mla_geometry.h"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/device_plan.h"
#include "kernels/cuda/fp8_convert.cuh"
#include "kernels/cuda/mma_primitives.cuh"

namespace attnkit::cuda_mla {

using cuda::CudaWorkItem;

using cuda::Fp8E4M3;  // storage type of an fp8 e4m3 latent cache

// Swizzled element index of (row, 16-byte chunk) in a [rows][576] tile: the chunk index is
// XORed with row % 8 inside its aligned group of 8 chunks (576 / 8 = 72 chunks = 9 groups),
// so the eight row addresses of one ldmatrix phase fall in different banks although every
// row is a multiple of 128 bytes long.
__device__ __forceinline__ int latent_swizzle(int row, int chunk) {
  return row * kMlaLatentDim + ((chunk ^ (row & 7)) << 3);
}

// The steps of mla_attention_cta. Everything is inlined into the kernel: the register state
// (O, the running max and sum, fp8 tiles in flight) is passed by reference, every size is a
// compile-time constant of C.
namespace mla_steps {

// Q tile into sQ; rows past row_end are zero-filled. Not committed: the first K/V tile's
// cp.async group (or, for fp8, a group of its own) carries it.
template <typename T, typename C>
__device__ __forceinline__ void load_q_tile(const PagedAttentionParams& p, const CudaWorkItem& item,
                                            int num_heads, int tid, T* s_q) {
  constexpr int kRows = C::kRows, kChunks = kMlaLatentDim / 8;
  for (int i = tid; i < kRows * kChunks; i += kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const int row = item.row_begin + r;
    const T* src = static_cast<const T*>(p.q);
    int bytes = 0;
    if (row < item.row_end) {
      src += (item.q_start + row / num_heads) * p.q_token_stride +
             (row % num_heads) * p.q_head_stride + c * 8;
      bytes = 16;
    }
    cuda::cp_async_16(s_q + latent_swizzle(r, c), src, bytes);
  }
}

// The CTA's view of one tile: the shared-memory regions (mla_geometry.h), the K/V tile
// loader, each warp's S-phase role and each thread's softmax role, and the phases of a tile
// over them (S, softmax, PV). Only constants live here; the register state is passed in.
template <typename T, typename KV, typename C>
struct MlaTileSteps {
  static constexpr int D = kMlaLatentDim, BN = kKvTile, kRows = C::kRows;
  static constexpr int kMTiles = C::kMTiles, STAGES = C::kStages;
  static constexpr int kFp8Loads = C::kFp8Loads;

  const PagedAttentionParams& p;
  T* s_q;
  T* s_kv;
  float* s_s;
  T* s_p;
  float* s_alpha;
  int seq, kv_begin, kv_end;
  cuda::FastDivmod block_div;  // by p.block_size (1 in contiguous mode, where it is unused)
  int lane, warp;
  float scale_log2;
  // Tile loader: kThreadsPerKey consecutive threads share one key (one block-table lookup)
  // and copy its 72 chunks, 8 consecutive chunks (128 bytes) per step across them.
  int my_key, my_part;
  // S-phase role of this warp.
  int s_mg, s_slice, s_ksplit;
  // Softmax role of this thread: row sm_row, keys [sm_sub * kKeysPerThread, +kKeysPerThread).
  int sm_row, sm_sub;
  bool sm_valid;
  int sm_pos;

  __device__ __forceinline__ MlaTileSteps(const PagedAttentionParams& params,
                                          const CudaWorkItem& item, int num_heads,
                                          unsigned char* smem, int tid, float scale_log2_)
      : p(params),
        s_q(reinterpret_cast<T*>(smem)),
        s_kv(reinterpret_cast<T*>(smem + C::kQBytes)),
        s_s(reinterpret_cast<float*>(smem + C::kQBytes + STAGES * C::kStageBytes)),
        s_p(reinterpret_cast<T*>(reinterpret_cast<unsigned char*>(s_s) + C::kSBytes)),
        s_alpha(reinterpret_cast<float*>(reinterpret_cast<unsigned char*>(s_p) + C::kPBytes)),
        seq(item.seq),
        kv_begin(item.kv_begin),
        kv_end(item.kv_end),
        block_div(params.block_table != nullptr ? params.block_size : 1),
        lane(tid & 31),
        warp(tid >> 5),
        scale_log2(scale_log2_) {
    my_key = tid / C::kThreadsPerKey;
    my_part = tid % C::kThreadsPerKey;
    s_mg = warp % C::kMGroups;
    const int s_rest = warp / C::kMGroups;
    s_slice = s_rest % C::kKeySlices;
    s_ksplit = s_rest / C::kKeySlices;
    sm_row = tid / C::kThreadsPerRow;
    sm_sub = tid % C::kThreadsPerRow;
    sm_valid = item.row_begin + sm_row < item.row_end;
    sm_pos = item.kv_len - item.q_len + (item.row_begin + sm_row) / num_heads;
  }

  __device__ __forceinline__ T* stage_of(int tile) const { return s_kv + (tile % STAGES) * BN * D; }

  // This thread's key of tile `tile` in the cache (the cache base when past kv_end).
  __device__ __forceinline__ const KV* key_row(int tile, bool& in_range) const {
    const int kpos = kv_begin + tile * BN + my_key;
    in_range = kpos < kv_end;
    const KV* base = static_cast<const KV*>(p.k_cache);
    return in_range ? base + cuda::kv_token_offset(p, block_div, seq, kpos, p.k_block_stride,
                                                   p.k_token_stride)
                    : base;
  }

  // A 16-bit cache's tile `tile` into `stage` with cp.async (not committed).
  __device__ __forceinline__ void load_tile_async(int tile, int stage) const {
    bool in_range = false;
    const KV* src = key_row(tile, in_range);
    T* dst = s_kv + stage * BN * D;
#pragma unroll
    for (int j = 0; j < C::kChunksPerThread; ++j) {
      const int c = my_part + j * C::kThreadsPerKey;
      // Keys past kv_end are zero-filled: the cache there may hold NaN garbage and a
      // masked score still multiplies V in the PV phase.
      cuda::cp_async_16(dst + latent_swizzle(my_key, c), src + c * 8, in_range ? 16 : 0);
    }
  }

  // fp8: the same key-per-thread split as load_tile_async, 8 bytes (one converted 16-byte
  // chunk) per load, one block-table lookup per tile; keys past kv_end read as 0.
  __device__ __forceinline__ void fp8_load(int tile, uint2 (&r)[kFp8Loads]) const {
    bool in_range = false;
    const KV* src = key_row(tile, in_range);
#pragma unroll
    for (int j = 0; j < kFp8Loads; ++j) {
      const int c = my_part + j * C::kThreadsPerKey;
      r[j] = in_range ? *reinterpret_cast<const uint2*>(src + c * 8) : make_uint2(0u, 0u);
    }
  }
  // fp8: the loaded tile, converted to T, into `stage`.
  __device__ __forceinline__ void fp8_store(int stage, const uint2 (&r)[kFp8Loads]) const {
    T* dst = s_kv + stage * BN * D;
#pragma unroll
    for (int j = 0; j < kFp8Loads; ++j) {
      const int c = my_part + j * C::kThreadsPerKey;
      *reinterpret_cast<uint4*>(dst + latent_swizzle(my_key, c)) = cuda::fp8x8_to<T, Fp8E4M3>(r[j]);
    }
  }

  // S phase, products: this warp's kSWarpMTiles m16 tiles x its key slice over its share of
  // the 576 dims.
  __device__ __forceinline__ void compute_qk(float (&acc)[C::kSWarpMTiles][C::kSNTiles][4],
                                             const T* s_k) const {
    constexpr int SMT = C::kSWarpMTiles, SNT = C::kSNTiles;
#pragma unroll
    for (int i = 0; i < SMT; ++i) {
#pragma unroll
      for (int nt = 0; nt < SNT; ++nt) {
        acc[i][nt][0] = acc[i][nt][1] = acc[i][nt][2] = acc[i][nt][3] = 0.0f;
      }
    }
    // Partly unrolled: fully unrolling lets the compiler hoist so many fragment loads
    // that the 128 O accumulators of the large configurations spill.
#pragma unroll 3
    for (int kk = 0; kk < C::kKSteps; ++kk) {
      const int ks = s_ksplit * C::kKSteps + kk;
      uint32_t a[SMT][4], b[SNT / 2][4];
#pragma unroll
      for (int i = 0; i < SMT; ++i) {
        cuda::ldmatrix_x4(
            a[i], s_q + latent_swizzle((s_mg * SMT + i) * 16 + (lane & 15), ks * 2 + (lane >> 4)));
      }
#pragma unroll
      for (int j = 0; j < SNT / 2; ++j) {
        const int key = s_slice * C::kSliceKeys + j * 16 + ((lane >> 4) << 3) + (lane & 7);
        cuda::ldmatrix_x4(b[j], s_k + latent_swizzle(key, ks * 2 + ((lane >> 3) & 1)));
      }
#pragma unroll
      for (int i = 0; i < SMT; ++i) {
#pragma unroll
        for (int j = 0; j < SNT / 2; ++j) {
          cuda::mma_16816<T>(acc[i][2 * j], a[i], b[j][0], b[j][1]);
          cuda::mma_16816<T>(acc[i][2 * j + 1], a[i], b[j][2], b[j][3]);
        }
      }
    }
  }

  // S phase, partial sums to shared memory (buffer `buffer`, added to what is there when
  // `add`).
  __device__ __forceinline__ void store_scores(const float (&acc)[C::kSWarpMTiles][C::kSNTiles][4],
                                               int buffer, bool add) const {
    constexpr int SMT = C::kSWarpMTiles, SNT = C::kSNTiles;
#pragma unroll
    for (int i = 0; i < SMT; ++i) {
      float* dst = s_s + (buffer * kRows + (s_mg * SMT + i) * 16 + (lane >> 2)) * C::kSStride +
                   s_slice * C::kSliceKeys + 2 * (lane & 3);
#pragma unroll
      for (int nt = 0; nt < SNT; ++nt) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float2* d = reinterpret_cast<float2*>(dst + h * 8 * C::kSStride + nt * 8);
          float2 v = make_float2(acc[i][nt][2 * h], acc[i][nt][2 * h + 1]);
          if (add) {
            const float2 prev = *d;
            v.x += prev.x;
            v.y += prev.y;
          }
          *d = v;
        }
      }
    }
  }

  // S phase: the products, then their partial sums to shared memory: a buffer per split, or
  // one buffer that split 1 adds to once split 0 has stored (every element has one writer
  // in each phase).
  __device__ __forceinline__ void s_phase(const T* s_k) const {
    float acc[C::kSWarpMTiles][C::kSNTiles][4];
    compute_qk(acc, s_k);
    if constexpr (C::kSInPlace) {
      if (s_ksplit == 0) store_scores(acc, 0, false);
      __syncthreads();
      if (s_ksplit == 1) store_scores(acc, 0, true);
    } else {
      store_scores(acc, s_ksplit, false);
    }
  }

  // Online softmax of tile `tile` (scores in log2 units): P and the rows' rescale factors,
  // the row's running max and sum (identical in the kThreadsPerRow threads of a row).
  __device__ __forceinline__ void softmax(int tile, float& run_m, float& run_l) const {
    constexpr int KPT = C::kKeysPerThread;
    const int kb = kv_begin + tile * BN;
    float x[KPT];
    float mx = -INFINITY;
#pragma unroll
    for (int e = 0; e < KPT; ++e) {
      const int local = sm_sub * KPT + e;
      float v = 0.0f;
#pragma unroll
      for (int ks = 0; ks < C::kSBuffers; ++ks)
        v += s_s[(ks * kRows + sm_row) * C::kSStride + local];
      const int key = kb + local;
      const bool visible = sm_valid && key < kv_end && cuda::key_visible(p, sm_pos, key);
      x[e] = visible ? v * scale_log2 : -INFINITY;
      mx = fmaxf(mx, x[e]);
    }
#pragma unroll
    for (int off = 1; off < C::kThreadsPerRow; off <<= 1) {
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
    }
    const float m_new = fmaxf(run_m, mx);
    const float alpha = cuda::safe_exp2(run_m, m_new);
    run_m = m_new;
    float sum = 0.0f;
    uint32_t* p_row = reinterpret_cast<uint32_t*>(s_p + sm_row * C::kPStride + sm_sub * KPT);
#pragma unroll
    for (int e = 0; e < KPT; e += 2) {
      const float p0 = cuda::safe_exp2(x[e], m_new);
      const float p1 = cuda::safe_exp2(x[e + 1], m_new);
      sum += p0 + p1;
      p_row[e / 2] = cuda::pack2<T>(p0, p1);
    }
#pragma unroll
    for (int off = 1; off < C::kThreadsPerRow; off <<= 1) {
      sum += __shfl_xor_sync(0xffffffffu, sum, off);
    }
    run_l = run_l * alpha + sum;
    if (sm_sub == 0) s_alpha[sm_row] = alpha;
  }

  // PV phase: rescale O to the rows' new maxima, then O[:, 64 warp .. +64) += P V over the
  // tile's keys.
  __device__ __forceinline__ void pv_phase(float (&o)[kMTiles][8][4], const T* s_k) const {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      const float a_lo = s_alpha[mt * 16 + (lane >> 2)];
      const float a_hi = s_alpha[mt * 16 + (lane >> 2) + 8];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        o[mt][j][0] *= a_lo;
        o[mt][j][1] *= a_lo;
        o[mt][j][2] *= a_hi;
        o[mt][j][3] *= a_hi;
      }
    }
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      uint32_t a[kMTiles][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        cuda::ldmatrix_x4(a[mt],
                          s_p + (mt * 16 + (lane & 15)) * C::kPStride + kk * 16 + (lane >> 4) * 8);
      }
#pragma unroll
      for (int dn = 0; dn < 4; ++dn) {
        uint32_t b[4];
        const int key = kk * 16 + (lane & 7) + (((lane >> 3) & 1) << 3);
        cuda::ldmatrix_x4_trans(b, s_k + latent_swizzle(key, warp * 8 + dn * 2 + (lane >> 4)));
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          cuda::mma_16816<T>(o[mt][2 * dn], a[mt], b[0], b[1]);
          cuda::mma_16816<T>(o[mt][2 * dn + 1], a[mt], b[2], b[3]);
        }
      }
    }
  }
};

// Tile loop of the kOverlap configurations. Three stages; per tile t: [barrier] PV(t) and
// S(t + 1) [barrier] softmax(t + 1). The mma work of two phases meets between two barriers
// instead of one phase between three, and the tensor cores are busy while the other half of
// the warps still works on the previous phase. Tile t + 1 is complete at the first barrier
// (issued one iteration earlier); tile t + 2 goes into the stage of tile t - 1, whose last
// reader (PV(t - 1)) finished before the previous iteration's second barrier.
template <typename T, typename KV, typename C, int kDepth>
__device__ __forceinline__ void run_tiles_overlapped(const MlaTileSteps<T, KV, C>& steps,
                                                     int num_tiles, float (&o)[C::kMTiles][8][4],
                                                     float& run_m, float& run_l,
                                                     uint2 (&fp8_regs)[kDepth][C::kFp8Loads]) {
  constexpr bool kFp8 = std::is_same_v<KV, Fp8E4M3>;
  constexpr int STAGES = C::kStages;
  static_assert(STAGES == 3, "tiles t and t + 1 resident while t + 2 loads");
  if constexpr (kFp8) {
    static_assert(kDepth == 1, "one register set");
    cuda::cp_async_commit();  // Q
    steps.fp8_load(0, fp8_regs[0]);
    steps.fp8_store(0, fp8_regs[0]);
    if (num_tiles > 1) {
      steps.fp8_load(1, fp8_regs[0]);
      steps.fp8_store(1, fp8_regs[0]);
    }
    if (num_tiles > 2) steps.fp8_load(2, fp8_regs[0]);
    cuda::cp_async_wait<0>();
  } else {
    if (num_tiles > 0) steps.load_tile_async(0, 0);
    cuda::cp_async_commit();  // group 0 also carries Q
    if (num_tiles > 1) steps.load_tile_async(1, 1);
    cuda::cp_async_commit();
    cuda::cp_async_wait<1>();
  }
  __syncthreads();
  if (num_tiles > 0) {
    steps.s_phase(steps.stage_of(0));
    __syncthreads();
    steps.softmax(0, run_m, run_l);
  }
  for (int tile = 0; tile < num_tiles; ++tile) {
    if constexpr (!kFp8) cuda::cp_async_wait<0>();
    __syncthreads();
    if constexpr (!kFp8) {
      if (tile + 2 < num_tiles) steps.load_tile_async(tile + 2, (tile + 2) % STAGES);
      cuda::cp_async_commit();
    }
    steps.pv_phase(o, steps.stage_of(tile));
    if (tile + 1 < num_tiles) {
      steps.s_phase(steps.stage_of(tile + 1));
      __syncthreads();
      steps.softmax(tile + 1, run_m, run_l);
      if constexpr (kFp8) {
        // Tile tile + 2 into the stage of tile - 1 (free since this iteration's first
        // barrier, read from the next one on), then the loads of tile tile + 3.
        if (tile + 2 < num_tiles) {
          steps.fp8_store((tile + 2) % STAGES, fp8_regs[0]);
          if (tile + 3 < num_tiles) steps.fp8_load(tile + 3, fp8_regs[0]);
        }
      }
    }
  }
}

// Tile loop of the other configurations: S phase, barrier, softmax, barrier, PV phase, per
// tile (plus the in-place add's barrier). fp8 runs kDepth tiles per iteration, so that the
// register set of tile + 1 + kDepth is chosen at compile time.
template <typename T, typename KV, typename C, int kDepth>
__device__ __forceinline__ void run_tiles(const MlaTileSteps<T, KV, C>& steps, int num_tiles,
                                          float (&o)[C::kMTiles][8][4], float& run_m, float& run_l,
                                          uint2 (&fp8_regs)[kDepth][C::kFp8Loads]) {
  constexpr bool kFp8 = std::is_same_v<KV, Fp8E4M3>;
  constexpr int STAGES = C::kStages;
  if constexpr (kFp8) {
    cuda::cp_async_commit();  // Q
    steps.fp8_load(0, fp8_regs[0]);
    steps.fp8_store(0, fp8_regs[0]);
    // Invariant at the top of tile t: tiles t + 1 .. t + kDepth are in flight in register
    // set (tile % kDepth).
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
      if (1 + d < num_tiles) steps.fp8_load(1 + d, fp8_regs[(1 + d) % kDepth]);
    }
  } else {
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < num_tiles) steps.load_tile_async(s, s);
      cuda::cp_async_commit();  // group 0 also carries Q
    }
  }
  for (int tile0 = 0; tile0 < num_tiles; tile0 += kDepth) {
#pragma unroll
    for (int unrolled = 0; unrolled < kDepth; ++unrolled) {
      const int tile = tile0 + unrolled;
      if (tile >= num_tiles) break;
      if constexpr (kFp8) {
        cuda::cp_async_wait<0>();  // Q (the first time)
      } else {
        cuda::cp_async_wait<STAGES - 2>();
      }
      __syncthreads();
      if constexpr (!kFp8) {
        if (tile + STAGES - 1 < num_tiles) {
          steps.load_tile_async(tile + STAGES - 1, (tile + STAGES - 1) % STAGES);
        }
        cuda::cp_async_commit();
      }
      steps.s_phase(steps.stage_of(tile));
      __syncthreads();
      steps.softmax(tile, run_m, run_l);
      __syncthreads();
      steps.pv_phase(o, steps.stage_of(tile));
      if constexpr (kFp8) {
        // Tile tile + 1 into the other stage (its last reader, tile - 1, finished before
        // this tile's barrier; the next barrier publishes it), then reuse its registers
        // for tile tile + 1 + kDepth.
        if (tile + 1 < num_tiles) {
          const int set = (unrolled + 1) % kDepth;  // a constant once the loop is unrolled
          steps.fp8_store((tile + 1) % STAGES, fp8_regs[set]);
          if (tile + 1 + kDepth < num_tiles) steps.fp8_load(tile + 1 + kDepth, fp8_regs[set]);
        }
      }
    }
  }
}

// Epilogue: the softmax threads publish each row's max and sum (s_m, then s_l: [kRows] fp32
// each, after s_alpha); every warp writes its 64 output dims of every row (or the split-KV
// partial, normalised, and its log2-sum-exp).
template <typename T, typename C>
__device__ __forceinline__ void write_output(const PagedAttentionParams& p,
                                             const CudaWorkItem& item, int num_heads, float* s_m,
                                             int tid, int sm_row, int sm_sub, float run_m,
                                             float run_l, float v_scale,
                                             const float (&o)[C::kMTiles][8][4], float* partial_o,
                                             float* partial_lse) {
  constexpr int kRows = C::kRows;
  const int lane = tid & 31, warp = tid >> 5;
  float* s_l = s_m + kRows;
  cuda::cp_async_wait<0>();
  if (sm_sub == 0) {
    s_m[sm_row] = run_m;
    s_l[sm_row] = run_l;
  }
  __syncthreads();
#pragma unroll
  for (int mt = 0; mt < C::kMTiles; ++mt) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = mt * 16 + (lane >> 2) + 8 * h;
      const int row = item.row_begin + r;
      if (row >= item.row_end) continue;
      const float m = s_m[r], l = s_l[r];
      const int token_in_req = row / num_heads;
      const int head = row % num_heads;
      const float factor = l > 0.0f ? v_scale / l : 0.0f;
      const int dim = warp * 64 + 2 * (lane & 3);
      if (item.num_splits > 1) {
        const int64_t slot_row =
            static_cast<int64_t>(item.partial_base + token_in_req * item.num_splits + item.split) *
                num_heads +
            head;
        float* dst = partial_o + slot_row * kMlaValueDim + dim;
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          *reinterpret_cast<float2*>(dst + j * 8) =
              make_float2(o[mt][j][2 * h] * factor, o[mt][j][2 * h + 1] * factor);
        }
        if (warp == 0 && (lane & 3) == 0) {
          partial_lse[slot_row] = l > 0.0f ? m + log2f(l) : -INFINITY;
        }
        continue;
      }
      T* out = static_cast<T*>(p.out) + (item.q_start + token_in_req) * p.o_token_stride +
               head * p.o_head_stride + dim;
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        *reinterpret_cast<uint32_t*>(out + j * 8) =
            cuda::pack2<T>(o[mt][j][2 * h] * factor, o[mt][j][2 * h + 1] * factor);
      }
    }
  }
}

}  // namespace mla_steps

template <typename T, typename KV, typename C>
__device__ __forceinline__ void mla_attention_cta(const PagedAttentionParams& p,
                                                  const CudaWorkItem* items, float* partial_o,
                                                  float* partial_lse) {
  using namespace mla_steps;
  constexpr int BN = kKvTile, kMTiles = C::kMTiles, STAGES = C::kStages;
  constexpr bool kFp8 = std::is_same_v<KV, Fp8E4M3>;
  static_assert(kFp8 || std::is_same_v<KV, T>, "16-bit caches hold the compute dtype");
  static_assert(!kFp8 || STAGES == 2 || C::kOverlap,
                "fp8: tiles in use plus the one being stored fill the stages");
  // The tile loop is unrolled kFp8Depth times for fp8 so that register set (tile % depth)
  // is chosen at compile time.
  constexpr int kDepth = kFp8 ? C::kFp8Depth : 1;

  extern __shared__ __align__(16) unsigned char smem[];
  const CudaWorkItem item = items[blockIdx.x];
  const int num_heads = p.num_heads;
  const int tid = threadIdx.x;
  const int num_tiles = (item.kv_end - item.kv_begin + BN - 1) / BN;
  const float k_scale = kFp8 ? p.k_scale : 1.0f;
  const float v_scale = kFp8 ? p.v_scale : 1.0f;
  const float scale_log2 = p.scale * k_scale * cuda::kLog2e;

  const MlaTileSteps<T, KV, C> steps(p, item, num_heads, smem, tid, scale_log2);
  load_q_tile<T, C>(p, item, num_heads, tid, steps.s_q);
  [[maybe_unused]] uint2 fp8_regs[kDepth][C::kFp8Loads];  // fp8 tiles in flight
  float run_m = -INFINITY, run_l = 0.0f;  // identical in the kThreadsPerRow threads of a row
  float o[kMTiles][8][4];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int j = 0; j < 8; ++j) o[mt][j][0] = o[mt][j][1] = o[mt][j][2] = o[mt][j][3] = 0.0f;

  if constexpr (C::kOverlap) {
    run_tiles_overlapped(steps, num_tiles, o, run_m, run_l, fp8_regs);
  } else {
    run_tiles(steps, num_tiles, o, run_m, run_l, fp8_regs);
  }
  write_output<T, C>(p, item, num_heads, steps.s_alpha + C::kRows, tid, steps.sm_row, steps.sm_sub,
                     run_m, run_l, v_scale, o, partial_o, partial_lse);
}

// sm_90-only configurations are not compiled for older architectures (the launcher never
// picks them there): their body would only cost compile time.
template <typename T, typename KV, typename C>
__global__ void __launch_bounds__(kThreads, C::kMinBlocks)
    mla_attention_kernel(PagedAttentionParams p, const CudaWorkItem* items, float* partial_o,
                         float* partial_lse) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  constexpr bool kCompiled = !C::kSm90Only;
#else
  constexpr bool kCompiled = true;
#endif
  if constexpr (kCompiled) {
    mla_attention_cta<T, KV, C>(p, items, partial_o, partial_lse);
  } else {
    __trap();
  }
}

}  // namespace attnkit::cuda_mla
