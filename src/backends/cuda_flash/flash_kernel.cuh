#pragma once
// CUDA_FLASH: tensor-core flash attention over the paged (or contiguous) KV cache.
//
// One CTA runs one CudaWorkItem for one KV head (grid = items x num_kv_heads, the KV head
// in x for decode configurations): kRows packed rows (token, query head of the GQA group)
// against the keys [kv_begin, kv_end), in tiles of BN keys streamed through shared memory
// by cp.async, STAGES deep. Warps form a WARPS_M x WARPS_N grid: warp (wm, wn) owns rows
// [wm*16*WM, +16*WM) and keys [wn*BN/WARPS_N, +BN/WARPS_N) of every tile, with its own
// online-softmax state (max m, sum l, unnormalised O in registers). The epilogue merges
// the WARPS_N states in shared memory and writes the output (or the split-KV partial; the
// last split of a group then merges the group in place, flash_split_merge.cuh).
//   prefill ("large rows"): WARPS_M = 4, WARPS_N = 1, WM = 2 -> 128 rows per CTA, each
//     K/V fragment loaded from shared memory feeds two m16 tiles.
//   decode ("small rows"):  WARPS_M = 1, WARPS_N = 2-4 -> 16 rows (e.g. 4 GQA heads x up
//     to 4 tokens) and the warps splitting every key tile (flash-decoding inside a CTA).
// Configurations and their register/shared-memory budgets: flash_launch.cuh.
//
// Loads: Q is its own cp.async group (then, with kQInRegs, read once into mma fragments);
// each K/V tile is one group. One block-table lookup per key and thread, made one tile
// ahead, serves all the key's chunks that thread copies. Scores stay raw dot products until the
// exponent (exp2(s * scale * log2 e - m), one FFMA + ex2); masks are applied only to tiles that
// straddle the causal diagonal, a window edge or kv_end.
//
// Shared memory (T elements, 16-byte chunks XOR-swizzled by row % 8 so that ldmatrix's
// eight row addresses fall in different banks):
//   sQ [kRows][D] | stage s: sK [BN][D], sV [BN][D]
// reused after the main loop as fp32 [WARPS_N][kRows][D + 4] partial O, then m and l.
//
// fp8 caches (e4m3, e5m2: FlashKvConfig): the stages hold the tiles as stored, one byte per
// value, half the bytes of a 16-bit tile. Decode CTAs (one m16 tile per warp) build their
// tensor-core fragments in registers straight from the staged bytes (Fp8Fragments below):
//   sQ [kRows][D] | stage s: K, V [BN][D] (fp8, chunks swizzled per Fp8Fragments)
// Prefill CTAs convert each landed tile exactly to T (fp8_convert.cuh) into one swizzled
// sK/sV tile that the tensor-core steps read as they read a 16-bit stage (a CTA barrier):
//   sQ [kRows][D] | sK [BN][D], sV [BN][D] (T) | stage s: K, V [BN][D] (fp8, unswizzled)
// A decode CTA's warps each copy and read their own keys (warp barriers only). The cache's
// scales are applied once: k_scale to the softmax scale, v_scale to the output.

#include "backends/cuda_flash/flash_kernels.h"
#include "backends/cuda_flash/flash_split_merge.cuh"
#include "backends/cuda_flash/flash_trace.cuh"
#include "kernels/cuda/device_common.cuh"
#include "kernels/cuda/fast_divmod.h"
#include "kernels/cuda/fp8_convert.cuh"
#include "kernels/cuda/mma_primitives.cuh"

namespace attnkit::cuda {

template <int D_, int WM_, int WARPS_M_, int WARPS_N_, int BN_, int STAGES_, bool Q_IN_REGS_,
          int MIN_CTAS_, int THREADS_PER_KEY_ = 0>
struct FlashConfig {
  static constexpr int D = D_;
  static constexpr int WM = WM_;
  static constexpr int WARPS_M = WARPS_M_;
  static constexpr int WARPS_N = WARPS_N_;
  static constexpr int BN = BN_;
  static constexpr int STAGES = STAGES_;
  // Q's mma fragments stay in registers for the whole key loop (D/16 * 4 registers per
  // m16 tile) instead of being re-read from shared memory for every key tile.
  static constexpr bool kQInRegs = Q_IN_REGS_;
  // CTAs per SM the register allocation must allow (__launch_bounds__).
  static constexpr int kMinCtas = MIN_CTAS_;
  // Threads that copy one key's row of a K/V tile (0: the fewest that keep every thread
  // busy, threads / BN). With 8, one cp.async instruction of a warp covers 4 keys x 128
  // bytes, i.e. 4 whole 128-byte lines, instead of 16 keys x 32 bytes (16 one-sector
  // requests to 16 different lines) with 2 threads per key: the L2 then serves DRAM's rate.
  static constexpr int kThreadsPerKey = THREADS_PER_KEY_ > 0 ? THREADS_PER_KEY_
                                                             : (32 * WARPS_M_ * WARPS_N_ >= BN_
                                                                    ? 32 * WARPS_M_ * WARPS_N_ / BN_
                                                                    : 1);
  // Decode grids put the KV head in blockIdx.x: the CTAs of one request's KV heads start
  // together and read the same K/V token rows (NHD: the heads of a token are adjacent)
  // at about the same time, which keeps DRAM pages and L2 lines shared. Prefill grids
  // put the item first, so that co-resident CTAs share one head's K/V in L2.
  static constexpr bool kKvHeadInX = WARPS_N_ > 1;
  // Decode CTAs read each K/V byte of the step once: their tile loads mark the lines
  // evict-first, so that a step larger than L2 (67 MB at 1 x 16384 tokens, 8 KV heads,
  // head size 128) does not flush what the step reads again: the work items, block table,
  // partials and split counters, and the kernel's own code, whose cold misses would
  // otherwise go to DRAM on the merging CTA's path and on the next step's prologue.
  static constexpr bool kStreamKv = kKvHeadInX;
  static constexpr int kThreads = 32 * WARPS_M * WARPS_N;
  // The split-KV merge (flash_split_merge.cuh) runs on every thread of the CTA.
  static constexpr int kMergeThreads = kThreads;
  static constexpr int kMergeThreadBase = 0;
  __device__ static void merge_sync() { __syncthreads(); }
  static constexpr int kRows = 16 * WM * WARPS_M;
  static constexpr int kWarpKeys = BN / WARPS_N;
  static constexpr int kChunks = D / 8;   // 16-byte chunks per row
  static constexpr int kOStride = D + 4;  // fp32 epilogue row stride (bank spread)
  static_assert(D % 64 == 0, "the swizzle needs at least 8 chunks per row");
  static_assert(kWarpKeys % 16 == 0, "a warp's keys form whole k16 steps of P*V");
  static_assert(STAGES >= 2, "double buffering at least");
  static constexpr size_t kMainBytes = 2u * (kRows * D + STAGES * 2 * BN * D);
  static constexpr size_t kEpilogueBytes = 4u * WARPS_N * kRows * (kOStride + 2);
  static constexpr size_t kSmemBytes = kMainBytes > kEpilogueBytes ? kMainBytes : kEpilogueBytes;
  static constexpr size_t kMergeSmemBytes = kSmemBytes;  // all of it, after the epilogue
};

// Stages of the fp8 decode configurations derived from a 16-bit one (0: twice that one's, the
// same shared memory, so twice the tiles in flight); head size 128 has its own
// (ATTNKIT_FLASH_DECODE_FP8_D128, flash_launch.cuh).
#ifndef ATTNKIT_FLASH_FP8_DECODE_STAGES
#define ATTNKIT_FLASH_FP8_DECODE_STAGES 0
#endif
// CTAs per SM of the fp8 decode configurations (0: the 16-bit configuration's kMinCtas):
// the __launch_bounds__ minimum, so the register cap, and the CTAs per SM that split-KV
// planning fills (flash_geometry). Shared memory must allow as many: stages x 2 x BN x D
// bytes plus Q's 2 x 16 x D per CTA.
#ifndef ATTNKIT_FLASH_FP8_DECODE_MIN_CTAS
#define ATTNKIT_FLASH_FP8_DECODE_MIN_CTAS 0
#endif

// A configuration C for a cache stored as KV: T itself (C's own layout) or an fp8 type,
// whose stages hold one byte per value (plus, for prefill, one converted tile: layout
// above). FP8_STAGES > 0 gives the fp8 decode configuration's stages outright (a
// configuration written for fp8, FlashSmallKvConfig); 0 takes them from
// ATTNKIT_FLASH_FP8_DECODE_STAGES or twice C's.
template <typename C, typename KV, int FP8_STAGES = ATTNKIT_FLASH_FP8_DECODE_STAGES>
struct FlashKvConfig : C {
  using Kv = KV;
  static constexpr bool kFp8 = kIsFp8<KV>;
  // fp8 decode: fragments built in registers from the staged bytes (Fp8Fragments).
  static constexpr bool kFp8Fragments = kFp8 && C::WARPS_M == 1 && C::WM == 1 && C::kQInRegs;
  // fp8 tiles are half the bytes: more stages keep more of them in flight.
  static constexpr int STAGES = !kFp8Fragments   ? C::STAGES
                                : FP8_STAGES > 0 ? FP8_STAGES
                                                 : 2 * C::STAGES;
  static_assert(STAGES >= 2, "double buffering at least");
  static constexpr int kMinCtas = kFp8Fragments && ATTNKIT_FLASH_FP8_DECODE_MIN_CTAS > 0
                                      ? ATTNKIT_FLASH_FP8_DECODE_MIN_CTAS
                                      : C::kMinCtas;
  static constexpr size_t kStagedTileBytes = sizeof(KV) * C::BN * C::D;  // one of K, V
  static constexpr size_t kConvertedBytes = kFp8 && !kFp8Fragments ? 2u * 2u * C::BN * C::D : 0u;
  static constexpr size_t kMainBytes =
      2u * C::kRows * C::D + kConvertedBytes + STAGES * 2u * kStagedTileBytes;
  static constexpr size_t kSmemBytes =
      kMainBytes > C::kEpilogueBytes ? kMainBytes : C::kEpilogueBytes;
  static constexpr size_t kMergeSmemBytes = kSmemBytes;
  // fp8 decode: a CTA's warps share no key of a tile (WARPS_M == 1), so each warp copies
  // and reads its own keys, and the tile loop needs no CTA barrier (the warps of a CTA then
  // run their tiles independently).
  static constexpr bool kWarpPrivateKv = kFp8Fragments;
};

// fp8 decode through registers (C::kFp8Fragments): the tensor-core steps read the staged
// fp8 tiles and build fp16 fragments in registers, one cvt per two values, so that a tile
// crosses shared memory once (no converted tile written and read back). Two freedoms make
// every shared-memory read a whole 16-byte piece of a row:
//  - S = Q K^T sums over the head dimension in any order: k16 step ks of lane quad t (t =
//    lane % 4) covers dimensions qk_dim(ks, t) + 0..3 (k = 2t, 2t+1, 2t+8, 2t+9), four
//    consecutive bytes of the key's row, and Q's fragments are built with the same order.
//  - O's columns are the head dimension too: column n of O's n8 tile dn is dimension
//    o_dim(dn, n), so lane group g (= lane / 4, the B column) reads consecutive bytes of
//    each of its four keys of a k16 step, and one byte permute pairs two keys' bytes of one
//    dimension (the two k of a B register).
// Both products run in fp16 whatever T is: every e4m3 and e5m2 value is exact in fp16 (one
// hardware cvt per pair, where bf16 would take three conversions more), P in [0, 1] keeps
// three more mantissa bits than in bf16, and each query row reaches fp16 exactly through
// a power of two (its largest |q| into [2^14, 2^15)) that its scores divide out again.
// Staged tiles of rows of >= 8 chunks are swizzled by 16-byte chunk, K: chunk ^ (key & 1)
// << 2, V: chunk ^ ((key >> 1) & 3) << 1, so that each quarter-warp's 16-byte reads fall in
// eight different bank groups.
template <typename C>
struct Fp8Fragments {
  static constexpr int D = C::D;
  static constexpr bool kSwizzled = D / 16 >= 8;
  __device__ static constexpr int k_swizzle(int key) { return kSwizzled ? (key & 1) << 2 : 0; }
  __device__ static constexpr int v_swizzle(int key) {
    return kSwizzled ? ((key >> 1) & 3) << 1 : 0;
  }
  // The first of lane quad t's four dimensions in k16 step ks: byte 4 (ks % 4) of chunk
  // 4 (ks / 4) + t of the key's row.
  __device__ static constexpr int qk_dim(int ks, int t) {
    return 16 * (4 * (ks / 4) + t) + 4 * (ks % 4);
  }
  // Dimension of column n of O's n8 tile dn: byte dn of the D / 8 that lane group n reads
  // of a V row (bytes 8n.. at D = 64; chunks n, n + 8, .. of 16 bytes otherwise).
  __device__ static constexpr int o_dim(int dn, int n) {
    return D == 64 ? 8 * n + dn : (dn / 16) * 128 + 16 * n + dn % 16;
  }
};

// Swizzled element index of (row, 16-byte chunk) in a [rows][D] tile.
template <int D>
__device__ __forceinline__ int swizzle(int row, int chunk) {
  return row * D + ((chunk ^ (row & 7)) << 3);
}

// ldmatrix addressing without per-fragment index arithmetic. A lane always reads row
// `row` (row & 7 == lane & 7) and chunk 2 * k + c0 (c0 in {0, 1}) of a swizzled tile, so
// its physical chunk is (2k + c0) ^ (row & 7) = 2k ^ (c0 ^ (row & 7)): the byte offset is
// row * 2D + ((32 k) ^ lane_xor) with lane_xor = (c0 ^ (row & 7)) << 4 fixed per lane.
struct LaneTileAddress {
  uint32_t row_addr;  // shared-window address of the lane's row
  uint32_t lane_xor;  // (c0 ^ (row & 7)) << 4
  __device__ __forceinline__ uint32_t at(int k, uint32_t offset) const {
    return row_addr + offset + ((static_cast<uint32_t>(k) * 32u) ^ lane_xor);
  }
};

// The steps of flash_attention_kernel, in the order it runs them. Each is inlined into the
// kernel: the register fragments are passed by reference to arrays, every size is a
// compile-time constant of C.

namespace flash_steps {

// K/V tile loads: the 16-byte chunks of one key go to kThreadsPerKey consecutive
// threads, so one block-table lookup per pass serves every chunk of the key that the
// thread copies, and each cp.async instruction of a warp reads whole sectors (whole
// 128-byte lines with 8 threads per key). Thread `sub` of a key copies chunks
// sub + j * kThreadsPerKey; with kThreadsPerKey a power of two that is (j * kThreadsPerKey)
// ^ sub, so the swizzled destination is row + ((16 j kThreadsPerKey) ^ dst_xor) and the
// source is one pointer plus immediates.
// An fp8 tile (C::kFp8) is copied the same way, unswizzled: its rows are D bytes, so a
// key has fewer chunks and may have fewer threads; with C::kWarpPrivateKv each warp copies
// only its own kWarpKeys keys of the tile.
template <typename C>
struct FlashKvTileLoader {
  using KV = typename C::Kv;
  static constexpr bool kWarpPrivate = C::kWarpPrivateKv;
  static constexpr int kElemsPerChunk = 16 / static_cast<int>(sizeof(KV));
  static constexpr int kRowChunks = C::D / kElemsPerChunk;
  static constexpr int kThreadsPerKey =
      C::kThreadsPerKey < kRowChunks ? C::kThreadsPerKey : kRowChunks;
  static constexpr int kLoaders = kWarpPrivate ? 32 : C::kThreads;  // threads sharing the keys
  static constexpr int kKeysPerPass = kLoaders / kThreadsPerKey;
  static constexpr int kChunksPerThread = kRowChunks / kThreadsPerKey;
  static constexpr int kPasses = (kWarpPrivate ? C::kWarpKeys : C::BN) / kKeysPerPass;
  static constexpr uint32_t kRowBytes = sizeof(KV) * C::D;
  static constexpr uint32_t kTileBytes = C::BN * kRowBytes;  // one of sK, sV
  static constexpr uint32_t kStageBytes = 2u * kTileBytes;
  static_assert((kThreadsPerKey & (kThreadsPerKey - 1)) == 0, "threads per key: power of two");
  static_assert((kWarpPrivate ? C::kWarpKeys : C::BN) % kKeysPerPass == 0 &&
                    (C::kFp8 || kKeysPerPass % 8 == 0) && kRowChunks % kThreadsPerKey == 0,
                "tile load mapping");

  const PagedAttentionParams& p;
  int kv_begin, kv_end;
  FastDivmod block_div;  // by p.block_size (1 in contiguous mode, where it is unused)
  int key_in_pass;
  uint32_t dst_row, dst_xor;
  const KV* k_base;
  const KV* v_base;
  const int32_t* block_row;
  int64_t contiguous_row;
  uint64_t stream_policy;

  __device__ __forceinline__ FlashKvTileLoader(const PagedAttentionParams& params,
                                               const CudaWorkItem& item, int kv_head, int tid,
                                               uint32_t s_kv)
      : p(params),
        kv_begin(item.kv_begin),
        kv_end(item.kv_end),
        block_div(params.block_table != nullptr ? params.block_size : 1) {
    const int sub = tid % kThreadsPerKey;
    // Warp-private: warp w (= wn, WARPS_M is 1) copies keys [w * kWarpKeys, +kWarpKeys).
    key_in_pass = kWarpPrivate ? (tid / 32) * C::kWarpKeys + (tid % 32) / kThreadsPerKey
                               : tid / kThreadsPerKey;
    dst_row = s_kv + static_cast<uint32_t>(key_in_pass) * kRowBytes;
    // (j * kThreadsPerKey * 16) ^ (sub << 4) is chunk sub + j * kThreadsPerKey unswizzled.
    dst_xor = static_cast<uint32_t>((C::kFp8 ? sub : sub ^ (key_in_pass & 7)) << 4);
    k_base = static_cast<const KV*>(p.k_cache) + static_cast<int64_t>(kv_head) * p.k_head_stride +
             sub * kElemsPerChunk;
    v_base = static_cast<const KV*>(p.v_cache) + static_cast<int64_t>(kv_head) * p.v_head_stride +
             sub * kElemsPerChunk;
    block_row = p.block_table != nullptr
                    ? p.block_table + static_cast<int64_t>(item.seq) * p.block_table_stride
                    : nullptr;
    contiguous_row = p.block_table != nullptr ? 0 : p.kv_start_loc[item.seq];
    stream_policy = C::kStreamKv ? l2_evict_first_policy() : 0;
  }

  // The physical block of this thread's key in each pass of a tile, looked up one tile
  // before its copies are issued: the block-table load is then off the path between a
  // tile's arrival and the next tile's cp.async (a dependent L2 round trip per tile).
  __device__ __forceinline__ void lookup_blocks(int tile, int (&blocks)[kPasses]) const {
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) {
      const int kpos = kv_begin + tile * C::BN + pass * kKeysPerPass + key_in_pass;
      blocks[pass] =
          block_row != nullptr && kpos < kv_end ? block_row[block_div.quotient(kpos)] : 0;
    }
  }

  // Issues the cp.async copies of key tile `tile` into stage `stage` (not committed).
  __device__ __forceinline__ void load_tile(int tile, int stage,
                                            const int (&blocks)[kPasses]) const {
    const int kb = kv_begin + tile * C::BN;
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) {
      const int kpos = kb + pass * kKeysPerPass + key_in_pass;
      // Out-of-range keys zero-fill (src-size 0) from a valid address.
      int64_t k_off = 0, v_off = 0;
      int bytes = 0;
      if (kpos < kv_end) {
        if (block_row != nullptr) {
          const int64_t block = blocks[pass];
          const int64_t slot = block_div.remainder(kpos, block_div.quotient(kpos));
          k_off = block * p.k_block_stride + slot * p.k_token_stride;
          v_off = block * p.v_block_stride + slot * p.v_token_stride;
        } else {
          k_off = (contiguous_row + kpos) * p.k_token_stride;
          v_off = (contiguous_row + kpos) * p.v_token_stride;
        }
        bytes = 16;
      }
      const KV* k_src = k_base + k_off;
      const KV* v_src = v_base + v_off;
      const uint32_t dst = dst_row + static_cast<uint32_t>(stage) * kStageBytes +
                           static_cast<uint32_t>(pass * kKeysPerPass) * kRowBytes;
      uint32_t k_xor = dst_xor, v_xor = dst_xor;
      if constexpr (C::kFp8Fragments) {  // the row's chunk swizzles (Fp8Fragments)
        const int key = pass * kKeysPerPass + key_in_pass;
        k_xor ^= static_cast<uint32_t>(Fp8Fragments<C>::k_swizzle(key)) << 4;
        v_xor ^= static_cast<uint32_t>(Fp8Fragments<C>::v_swizzle(key)) << 4;
      }
#pragma unroll
      for (int j = 0; j < kChunksPerThread; ++j) {
        const uint32_t chunk = static_cast<uint32_t>(j * kThreadsPerKey) * 16u;
        const uint32_t k_dst = dst + (chunk ^ k_xor), v_dst = dst + kTileBytes + (chunk ^ v_xor);
        constexpr int kStep = kThreadsPerKey * kElemsPerChunk;
        if constexpr (C::kStreamKv) {
          cp_async_16(k_dst, k_src + j * kStep, bytes, stream_policy);
          cp_async_16(v_dst, v_src + j * kStep, bytes, stream_policy);
        } else {
          cp_async_16(k_dst, k_src + j * kStep, bytes);
          cp_async_16(v_dst, v_src + j * kStep, bytes);
        }
      }
    }
  }
};

// fp8: keys [key_lo, key_lo + keys) of the landed K and V tiles at `staged` (C::kFp8
// layout) converted exactly to T into the swizzled sK/sV tile at `converted`, by `count`
// threads from `index` on (16 stored values, two 16-byte chunks of T, per step).
template <typename T, typename C>
__device__ __forceinline__ void convert_fp8_tile(const unsigned char* staged, T* converted,
                                                 int key_lo, int keys, int index, int count) {
  using KV = typename C::Kv;
  constexpr int D = C::D, kRowChunks = D / 16;
  constexpr int kTileElems = C::BN * D;
  for (int i = index; i < keys * kRowChunks; i += count) {
    const int key = key_lo + i / kRowChunks, c = i % kRowChunks;
#pragma unroll
    for (int kv = 0; kv < 2; ++kv) {  // K, then V
      const uint4 raw =
          *reinterpret_cast<const uint4*>(staged + kv * kTileElems + key * D + c * 16);
      T* dst = converted + kv * kTileElems;
      *reinterpret_cast<uint4*>(dst + swizzle<D>(key, 2 * c)) =
          fp8x8_to<T, KV>(make_uint2(raw.x, raw.y));
      *reinterpret_cast<uint4*>(dst + swizzle<D>(key, 2 * c + 1)) =
          fp8x8_to<T, KV>(make_uint2(raw.z, raw.w));
    }
  }
}

// Q tile (rows past row_end are zero-filled) into sQ, its own cp.async group.
template <typename T, typename C>
__device__ __forceinline__ void load_q_tile(const PagedAttentionParams& p, const CudaWorkItem& item,
                                            int kv_head, int group, int tid, T* s_q) {
  constexpr int kChunks = C::kChunks;
  for (int i = tid; i < C::kRows * kChunks; i += C::kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const int row = item.row_begin + r;
    const T* src = static_cast<const T*>(p.q);
    int bytes = 0;
    if (row < item.row_end) {
      const int token = item.q_start + row / group;
      const int head = kv_head * group + row % group;
      src += token * p.q_token_stride + head * p.q_head_stride + c * 8;
      bytes = 16;
    }
    cp_async_16(s_q + swizzle<C::D>(r, c), src, bytes);
  }
  cp_async_commit();
}

// Decode steps fold the cache update into this launch (fresh.key set, see
// launch_flash_attention): every CTA whose key range holds some of this step's new
// positions first copies those keys/values of its KV head from the inputs into their
// cache slots, then reads them back like any other key (its own writes, ordered by the
// barrier). No other CTA of the launch reads those bytes without writing them first; CTAs
// of other row tiles of the same request write the same values.
template <typename T, typename C>
__device__ __forceinline__ void write_fresh_kv(const CacheUpdateParams& fresh,
                                               const CudaWorkItem& item, int kv_head, int pos_base,
                                               int tid) {
  constexpr int kChunks = C::kChunks;
  const int kv_begin = item.kv_begin, kv_end = item.kv_end;
  const int new_begin = kv_begin > pos_base ? kv_begin : pos_base;
  const int new_count = kv_end - new_begin;
  for (int i = tid; i < new_count * kChunks; i += C::kThreads) {
    const int kpos = new_begin + i / kChunks, c = i % kChunks;
    const int token = item.q_start + (kpos - pos_base);
    const int64_t slot = fresh.slot_mapping[token];
    if (slot < 0) continue;  // padding token
    const int64_t block = slot / fresh.block_size, offset = slot % fresh.block_size;
    const uint4 k = *reinterpret_cast<const uint4*>(static_cast<const T*>(fresh.key) +
                                                    token * fresh.key_token_stride +
                                                    kv_head * fresh.key_head_stride + c * 8);
    const uint4 v = *reinterpret_cast<const uint4*>(static_cast<const T*>(fresh.value) +
                                                    token * fresh.value_token_stride +
                                                    kv_head * fresh.value_head_stride + c * 8);
    *reinterpret_cast<uint4*>(static_cast<T*>(fresh.k_cache) + block * fresh.k_block_stride +
                              offset * fresh.k_token_stride + kv_head * fresh.k_head_stride +
                              c * 8) = k;
    *reinterpret_cast<uint4*>(static_cast<T*>(fresh.v_cache) + block * fresh.v_block_stride +
                              offset * fresh.v_token_stride + kv_head * fresh.v_head_stride +
                              c * 8) = v;
  }
  __syncthreads();
}

// Per-lane ldmatrix addresses of a warp's Q rows, its K keys (B of S = Q K^T) and its V
// keys (B of O += P V, transposed), see LaneTileAddress.
struct FlashLaneAddresses {
  LaneTileAddress q, k, v;
};
template <typename C>
__device__ __forceinline__ FlashLaneAddresses lane_tile_addresses(uint32_t q_base, uint32_t kv_base,
                                                                  int lane, int wm, int wn) {
  constexpr uint32_t kRowBytes = 2u * C::D;
  constexpr uint32_t kTileBytes = C::BN * kRowBytes;
  const int l7 = lane & 7;
  const LaneTileAddress q_addr{
      q_base + static_cast<uint32_t>(wm * 16 * C::WM + (lane & 15)) * kRowBytes,
      static_cast<uint32_t>(((lane >> 4) ^ l7) << 4)};
  const LaneTileAddress k_addr{
      kv_base + static_cast<uint32_t>(wn * C::kWarpKeys + ((lane >> 4) << 3) + l7) * kRowBytes,
      static_cast<uint32_t>((((lane >> 3) & 1) ^ l7) << 4)};
  const LaneTileAddress v_addr{
      kv_base + kTileBytes +
          static_cast<uint32_t>(wn * C::kWarpKeys + l7 + (((lane >> 3) & 1) << 3)) * kRowBytes,
      static_cast<uint32_t>(((lane >> 4) ^ l7) << 4)};
  return {q_addr, k_addr, v_addr};
}

// Q fragments (A operand of S = Q K^T, [mi][k16 step][4]) read once from sQ, when they stay
// in registers for the whole key loop (C::kQInRegs).
template <typename C>
__device__ __forceinline__ void load_q_fragments(uint32_t (&q_frag)[C::WM][C::D / 16][4],
                                                 const LaneTileAddress& q_addr) {
  constexpr uint32_t kRowBytes = 2u * C::D;
#pragma unroll
  for (int mi = 0; mi < C::WM; ++mi)
#pragma unroll
    for (int ks = 0; ks < C::D / 16; ++ks)
      ldmatrix_x4(q_frag[mi][ks], q_addr.at(ks, mi * 16 * kRowBytes));
}

// fp8 decode (C::kFp8Fragments): Q's fp16 fragments in the dimension order of
// Fp8Fragments, each of the lane's two rows (g, g + 8) times 2^shift so that its largest
// |q| lies in [2^14, 2^15) (exact: T has at most fp16's 11 significant bits, and the
// row's values that end below fp16's normal range are 2^28 times smaller than its
// largest); q_unscale = 2^-shift takes the rows' scores back.
template <typename T, typename C>
__device__ __forceinline__ void load_q_fragments_fp8(uint32_t (&q_frag)[1][C::D / 16][4],
                                                     float (&q_unscale)[2], const T* s_q,
                                                     int lane) {
  using F = Fp8Fragments<C>;
  constexpr int D = C::D;
  const int g = lane >> 2, t = lane & 3;
  // Four consecutive values of row r from dimension d (a multiple of 4) of the swizzled sQ.
  auto quad = [&](int r, int d) -> uint2 {
    return *reinterpret_cast<const uint2*>(s_q + swizzle<D>(r, d / 8) + d % 8);
  };
  float q_scale[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float big = 0.0f;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      const uint2 v = quad(g + 8 * h, F::qk_dim(ks, t));
      const float2 a = unpack2<T>(v.x), b = unpack2<T>(v.y);
      big = fmaxf(big, fmaxf(fmaxf(fabsf(a.x), fabsf(a.y)), fmaxf(fabsf(b.x), fabsf(b.y))));
    }
    big = fmaxf(big, __shfl_xor_sync(0xffffffffu, big, 1));
    big = fmaxf(big, __shfl_xor_sync(0xffffffffu, big, 2));
    const int shift = fp16_row_shift(big);
    q_scale[h] = ldexpf(1.0f, shift);
    q_unscale[h] = ldexpf(1.0f, -shift);
  }
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint2 v = quad(g + 8 * h, F::qk_dim(ks, t));
      const float2 a = unpack2<T>(v.x), b = unpack2<T>(v.y);
      q_frag[0][ks][h] = pack2<__half>(a.x * q_scale[h], a.y * q_scale[h]);      // k 2t, 2t+1
      q_frag[0][ks][2 + h] = pack2<__half>(b.x * q_scale[h], b.y * q_scale[h]);  // k 2t+8, 2t+9
    }
  }
}

// fp8 decode: S = Q K^T for this warp's keys of the staged K tile `k_tile`, the K fragments
// converted in registers (Fp8Fragments), then each row's scores times q_unscale.
template <typename C>
__device__ __forceinline__ void compute_qk_fp8(float (&s)[1][C::kWarpKeys / 8][4],
                                               const uint32_t (&q_frag)[1][C::D / 16][4],
                                               const float (&q_unscale)[2],
                                               const unsigned char* k_tile, int lane, int wn) {
  using F = Fp8Fragments<C>;
  using KV = typename C::Kv;
  constexpr int D = C::D, kNT = C::kWarpKeys / 8;
  const int g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int j = 0; j < kNT; ++j) s[0][j][0] = s[0][j][1] = s[0][j][2] = s[0][j][3] = 0.0f;
#pragma unroll
  for (int c = 0; c < D / 64; ++c) {  // the lane's 16-byte chunks of each key row
    uint4 raw[kNT];
#pragma unroll
    for (int j = 0; j < kNT; ++j) {
      const int key = wn * C::kWarpKeys + j * 8 + g;
      raw[j] = *reinterpret_cast<const uint4*>(k_tile + key * D +
                                               (((4 * c + t) ^ F::k_swizzle(key)) << 4));
    }
#pragma unroll
    for (int w = 0; w < 4; ++w) {
#pragma unroll
      for (int j = 0; j < kNT; ++j) {
        const uint32_t word = w == 0 ? raw[j].x : w == 1 ? raw[j].y : w == 2 ? raw[j].z : raw[j].w;
        mma_16816<__half>(s[0][j], q_frag[0][4 * c + w], fp8x2_to<__half, KV>(word),
                          fp8x2_high_to_half2<KV>(word));
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kNT; ++j) {
    s[0][j][0] *= q_unscale[0];
    s[0][j][1] *= q_unscale[0];
    s[0][j][2] *= q_unscale[1];
    s[0][j][3] *= q_unscale[1];
  }
}

// fp8 decode: O += P V from the staged V tile `v_tile`, P as fp16. Lane (g, t) reads, for
// each k16 step, the D / 8 bytes of lane group g (Fp8Fragments::o_dim) of keys 2t, 2t+1,
// 2t+8 and 2t+9; a byte permute pairs keys 2t and 2t+1 (and 2t+8, 2t+9) of one dimension,
// the two k of a B register.
template <typename C>
__device__ __forceinline__ void accumulate_pv_fp8(float (&o)[1][C::D / 8][4],
                                                  const float (&s)[1][C::kWarpKeys / 8][4],
                                                  const unsigned char* v_tile, int lane, int wn) {
  using F = Fp8Fragments<C>;
  using KV = typename C::Kv;
  constexpr int D = C::D;
  const int g = lane >> 2, t = lane & 3;
  // B registers of four n8 tiles from one 32-bit word of each key pair: low pair (keys 2t,
  // 2t+1) and high pair (2t+8, 2t+9), bytes 0..3 = tiles dn .. dn + 3.
  auto four_tiles = [&](const uint32_t(&a)[4], int dn, uint32_t k0, uint32_t k1, uint32_t k8,
                        uint32_t k9) {
    const uint32_t lo01 = __byte_perm(k0, k1, 0x5140), hi01 = __byte_perm(k0, k1, 0x7362);
    const uint32_t lo89 = __byte_perm(k8, k9, 0x5140), hi89 = __byte_perm(k8, k9, 0x7362);
    mma_16816<__half>(o[0][dn], a, fp8x2_to<__half, KV>(lo01), fp8x2_to<__half, KV>(lo89));
    mma_16816<__half>(o[0][dn + 1], a, fp8x2_high_to_half2<KV>(lo01),
                      fp8x2_high_to_half2<KV>(lo89));
    mma_16816<__half>(o[0][dn + 2], a, fp8x2_to<__half, KV>(hi01), fp8x2_to<__half, KV>(hi89));
    mma_16816<__half>(o[0][dn + 3], a, fp8x2_high_to_half2<KV>(hi01),
                      fp8x2_high_to_half2<KV>(hi89));
  };
#pragma unroll
  for (int kk = 0; kk < C::kWarpKeys / 16; ++kk) {
    uint32_t a[4];
    a[0] = pack2<__half>(s[0][2 * kk][0], s[0][2 * kk][1]);
    a[1] = pack2<__half>(s[0][2 * kk][2], s[0][2 * kk][3]);
    a[2] = pack2<__half>(s[0][2 * kk + 1][0], s[0][2 * kk + 1][1]);
    a[3] = pack2<__half>(s[0][2 * kk + 1][2], s[0][2 * kk + 1][3]);
    const int key0 = wn * C::kWarpKeys + kk * 16 + 2 * t;
    const unsigned char* row0 = v_tile + key0 * D;
    if constexpr (D == 64) {
      uint2 r[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        r[i] = *reinterpret_cast<const uint2*>(row0 + ((i & 1) + 8 * (i >> 1)) * D + 8 * g);
      }
      four_tiles(a, 0, r[0].x, r[1].x, r[2].x, r[3].x);
      four_tiles(a, 4, r[0].y, r[1].y, r[2].y, r[3].y);
    } else {
      // (key >> 1) & 3 is t for all four keys: one swizzled chunk offset serves them.
      const int swz = F::v_swizzle(key0);
#pragma unroll
      for (int cc = 0; cc < D / 128; ++cc) {
        const int chunk_off = ((cc * 8 + g) ^ swz) << 4;
        uint4 r[4];
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          r[i] = *reinterpret_cast<const uint4*>(row0 + ((i & 1) + 8 * (i >> 1)) * D + chunk_off);
        }
        four_tiles(a, cc * 16, r[0].x, r[1].x, r[2].x, r[3].x);
        four_tiles(a, cc * 16 + 4, r[0].y, r[1].y, r[2].y, r[3].y);
        four_tiles(a, cc * 16 + 8, r[0].z, r[1].z, r[2].z, r[3].z);
        four_tiles(a, cc * 16 + 12, r[0].w, r[1].w, r[2].w, r[3].w);
      }
    }
  }
}

// Running online-softmax state of a warp's rows: O = 0, m = -inf, l = 0.
template <typename C>
__device__ __forceinline__ void init_softmax_state(float (&o)[C::WM][C::D / 8][4],
                                                   float (&m)[C::WM][2], float (&l)[C::WM][2]) {
#pragma unroll
  for (int mi = 0; mi < C::WM; ++mi) {
#pragma unroll
    for (int j = 0; j < C::D / 8; ++j) o[mi][j][0] = o[mi][j][1] = o[mi][j][2] = o[mi][j][3] = 0.0f;
    m[mi][0] = m[mi][1] = -INFINITY;
    l[mi][0] = l[mi][1] = 0.0f;
  }
}

// S = Q K^T for this warp's rows and keys of the tile in the stage at stage_off (raw dot
// products). Q comes from q_frag (C::kQInRegs) or from sQ at every k16 step.
template <typename T, typename C, int kQFrag>
__device__ __forceinline__ void compute_qk(float (&s)[C::WM][C::kWarpKeys / 8][4],
                                           const uint32_t (&q_frag)[C::WM][kQFrag][4],
                                           const LaneTileAddress& q_addr,
                                           const LaneTileAddress& k_addr, uint32_t stage_off) {
  constexpr int WM = C::WM, kNT = C::kWarpKeys / 8;
  constexpr uint32_t kRowBytes = 2u * C::D;
#pragma unroll
  for (int mi = 0; mi < WM; ++mi)
#pragma unroll
    for (int j = 0; j < kNT; ++j) s[mi][j][0] = s[mi][j][1] = s[mi][j][2] = s[mi][j][3] = 0.0f;
#pragma unroll
  for (int ks = 0; ks < C::D / 16; ++ks) {
    uint32_t a_smem[C::kQInRegs ? 1 : WM][4];
    if constexpr (!C::kQInRegs) {
#pragma unroll
      for (int mi = 0; mi < WM; ++mi) ldmatrix_x4(a_smem[mi], q_addr.at(ks, mi * 16 * kRowBytes));
    }
#pragma unroll
    for (int nj = 0; nj < kNT / 2; ++nj) {
      uint32_t b[4];
      ldmatrix_x4(b, k_addr.at(ks, stage_off + nj * 16 * kRowBytes));
#pragma unroll
      for (int mi = 0; mi < WM; ++mi) {
        if constexpr (C::kQInRegs) {
          mma_16816<T>(s[mi][2 * nj], q_frag[mi][ks], b[0], b[1]);
          mma_16816<T>(s[mi][2 * nj + 1], q_frag[mi][ks], b[2], b[3]);
        } else {
          mma_16816<T>(s[mi][2 * nj], a_smem[mi], b[0], b[1]);
          mma_16816<T>(s[mi][2 * nj + 1], a_smem[mi], b[2], b[3]);
        }
      }
    }
  }
}

// Soft-cap maps s to cap/scale * tanh(s * scale / cap) (same units as the raw scores).
template <typename C>
__device__ __forceinline__ void apply_soft_cap(float (&s)[C::WM][C::kWarpKeys / 8][4], float cap_in,
                                               float cap_out) {
#pragma unroll
  for (int mi = 0; mi < C::WM; ++mi)
#pragma unroll
    for (int j = 0; j < C::kWarpKeys / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[mi][j][e] = cap_out * fast_tanh(s[mi][j][e] * cap_in);
}

// Sets the scores of the keys a row does not see (mask.h's rule) to -inf.
template <typename C>
__device__ __forceinline__ void mask_scores(float (&s)[C::WM][C::kWarpKeys / 8][4],
                                            const PagedAttentionParams& p, int row_begin, int group,
                                            int pos_base, int kv_end, int kb, int lane, int wm,
                                            int wn) {
#pragma unroll
  for (int mi = 0; mi < C::WM; ++mi) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = wm * 16 * C::WM + mi * 16 + (lane >> 2) + 8 * h;
      const KeyWindow w = visible_keys(p, pos_base + (row_begin + r) / group, kv_end);
#pragma unroll
      for (int j = 0; j < C::kWarpKeys / 8; ++j) {
#pragma unroll
        for (int e = 2 * h; e < 2 * h + 2; ++e) {
          const int key = kb + wn * C::kWarpKeys + j * 8 + 2 * (lane & 3) + (e & 1);
          if (key < w.lo || key > w.hi) s[mi][j][e] = -INFINITY;
        }
      }
    }
  }
}

// Key tiles between the block-table lookup of a tile's physical blocks and the copies that
// need them (1: the lookup of tile t + STAGES is issued after the copies of tile
// t + STAGES - 1, a tile's compute before its use). A lookup is a global load queued
// behind the copies in flight, so it can take as long as a tile does to land; with n >= 2
// the ids of n tiles are held in registers (n x passes) and each lookup goes out before the
// copies of its iteration.
#ifndef ATTNKIT_FLASH_BLOCK_LOOKAHEAD
#define ATTNKIT_FLASH_BLOCK_LOOKAHEAD 1
#endif
inline constexpr int kBlockLookahead = ATTNKIT_FLASH_BLOCK_LOOKAHEAD;
static_assert(kBlockLookahead >= 1 && kBlockLookahead <= 4,
              "ATTNKIT_FLASH_BLOCK_LOOKAHEAD: 1 to 4");

// The running maximum m moves only when a tile's maximum exceeds it by more than this
// (log2 units, >= 0): otherwise m stays, alpha is exactly 1 and O and l are not rescaled
// (rescale_o), at the cost of weights up to 2^threshold instead of 1. Bound: the weights
// enter P*V as 16-bit A fragments (fp16 in the fp8 path, largest 65504 ~ 2^16) and O, l
// accumulate in fp32, so 8 keeps a factor 2^8 of headroom below fp16's range. 0 (the
// default): m is the running maximum itself, the update as written without the switch.
#ifndef ATTNKIT_FLASH_RESCALE_THRESHOLD
#define ATTNKIT_FLASH_RESCALE_THRESHOLD 0.0f
#endif
inline constexpr float kRescaleThreshold = ATTNKIT_FLASH_RESCALE_THRESHOLD;
static_assert(kRescaleThreshold >= 0.0f && kRescaleThreshold <= 8.0f,
              "ATTNKIT_FLASH_RESCALE_THRESHOLD: 0 to 8 (log2 units)");

// Online softmax: the new row maxima m, the factors alpha that rescale the running state to
// them, the probabilities (in place in s) and the running sums l.
template <typename C>
__device__ __forceinline__ void online_softmax_update(float (&s)[C::WM][C::kWarpKeys / 8][4],
                                                      float (&m)[C::WM][2], float (&l)[C::WM][2],
                                                      float (&alpha)[C::WM][2], float scale_log2) {
  constexpr int kNT = C::kWarpKeys / 8;
#pragma unroll
  for (int mi = 0; mi < C::WM; ++mi) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < kNT; ++j) mx = fmaxf(mx, fmaxf(s[mi][j][2 * h], s[mi][j][2 * h + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      float m_new;
      if constexpr (kRescaleThreshold > 0.0f) {
        // -inf + threshold is -inf: a row's first visible key always sets m.
        const float tile_max = mx * scale_log2;
        m_new = tile_max > m[mi][h] + kRescaleThreshold ? tile_max : m[mi][h];
      } else {
        m_new = fmaxf(m[mi][h], mx * scale_log2);
      }
      // A row with no visible key yet keeps m = -inf; subtracting 0 then gives
      // exp2(-inf) = 0 for every weight instead of NaN.
      const float m_use = m_new == -INFINITY ? 0.0f : m_new;
      alpha[mi][h] = fast_exp2(m[mi][h] - m_use);
      m[mi][h] = m_new;
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kNT; ++j) {
#pragma unroll
        for (int e = 2 * h; e < 2 * h + 2; ++e) {
          const float pv = fast_exp2(fmaf(s[mi][j][e], scale_log2, -m_use));
          s[mi][j][e] = pv;
          sum += pv;
        }
      }
      l[mi][h] = l[mi][h] * alpha[mi][h] + sum;
    }
  }
}

// O's rescale only when some row maximum of the warp moved: alpha is exactly 1
// otherwise (ex2(0)), which leaves O unchanged. Once the maxima settle, most tiles skip
// the WM * D / 2 multiplies per thread; the test is warp-uniform.
template <typename C>
__device__ __forceinline__ void rescale_o(float (&o)[C::WM][C::D / 8][4],
                                          const float (&alpha)[C::WM][2]) {
  bool moved = false;
#pragma unroll
  for (int mi = 0; mi < C::WM; ++mi) moved |= alpha[mi][0] != 1.0f || alpha[mi][1] != 1.0f;
  if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
    for (int mi = 0; mi < C::WM; ++mi) {
#pragma unroll
      for (int j = 0; j < C::D / 8; ++j) {
        o[mi][j][0] *= alpha[mi][0];
        o[mi][j][1] *= alpha[mi][0];
        o[mi][j][2] *= alpha[mi][1];
        o[mi][j][3] *= alpha[mi][1];
      }
    }
  }
}

// O += P V: the S accumulators of two adjacent n8 tiles are exactly one A fragment.
template <typename T, typename C>
__device__ __forceinline__ void accumulate_pv(float (&o)[C::WM][C::D / 8][4],
                                              const float (&s)[C::WM][C::kWarpKeys / 8][4],
                                              const LaneTileAddress& v_addr, uint32_t stage_off) {
  constexpr int WM = C::WM;
  constexpr uint32_t kRowBytes = 2u * C::D;
#pragma unroll
  for (int kk = 0; kk < C::kWarpKeys / 16; ++kk) {
    uint32_t a[WM][4];
#pragma unroll
    for (int mi = 0; mi < WM; ++mi) {
      a[mi][0] = pack2<T>(s[mi][2 * kk][0], s[mi][2 * kk][1]);
      a[mi][1] = pack2<T>(s[mi][2 * kk][2], s[mi][2 * kk][3]);
      a[mi][2] = pack2<T>(s[mi][2 * kk + 1][0], s[mi][2 * kk + 1][1]);
      a[mi][3] = pack2<T>(s[mi][2 * kk + 1][2], s[mi][2 * kk + 1][3]);
    }
#pragma unroll
    for (int dn = 0; dn < C::D / 16; ++dn) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, v_addr.at(dn, stage_off + kk * 16 * kRowBytes));
#pragma unroll
      for (int mi = 0; mi < WM; ++mi) {
        mma_16816<T>(o[mi][2 * dn], a[mi], b[0], b[1]);
        mma_16816<T>(o[mi][2 * dn + 1], a[mi], b[2], b[3]);
      }
    }
  }
}

// Epilogue, first half: every warp parks its (m, l, O) in shared memory (s_o: fp32
// [WARPS_N][kRows][kOStride], s_m and s_l: [WARPS_N][kRows]), l summed over the row's four
// lanes.
template <typename C>
__device__ __forceinline__ void store_warp_state(float* s_o, float* s_m, float* s_l,
                                                 const float (&o)[C::WM][C::D / 8][4],
                                                 const float (&m)[C::WM][2],
                                                 const float (&l)[C::WM][2],
                                                 const CudaWorkItem& item, int lane, int wm,
                                                 int wn) {
  constexpr int kRows = C::kRows;
#pragma unroll
  for (int mi = 0; mi < C::WM; ++mi) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float sum = l[mi][h];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const int r = wm * 16 * C::WM + mi * 16 + (lane >> 2) + 8 * h;
      // Padding rows (past row_end: most of a decode tile's 16 rows) are never read.
      if (item.row_begin + r >= item.row_end) continue;
      float* row_o = s_o + (wn * kRows + r) * C::kOStride;
#pragma unroll
      for (int j = 0; j < C::D / 8; ++j) {
        if constexpr (C::kFp8Fragments) {  // O's columns in Fp8Fragments' order
          row_o[Fp8Fragments<C>::o_dim(j, 2 * (lane & 3))] = o[mi][j][2 * h];
          row_o[Fp8Fragments<C>::o_dim(j, 2 * (lane & 3) + 1)] = o[mi][j][2 * h + 1];
        } else {
          *reinterpret_cast<float2*>(row_o + j * 8 + 2 * (lane & 3)) =
              make_float2(o[mi][j][2 * h], o[mi][j][2 * h + 1]);
        }
      }
      if ((lane & 3) == 0) {
        s_m[wn * kRows + r] = m[mi][h];
        s_l[wn * kRows + r] = sum;
      }
    }
  }
}

// Epilogue, second half: all threads merge the WARPS_N states of each row and write 8
// output elements at a time, or (split-KV) the normalised partial row and its
// log2-sum-exp.
template <typename T, typename C>
__device__ __forceinline__ void write_output(const PagedAttentionParams& p,
                                             const CudaWorkItem& item, int kv_head, int group,
                                             int tid, const float* s_o, const float* s_m,
                                             const float* s_l, float* partial_o, float* partial_lse,
                                             float v_scale) {
  constexpr int kRows = C::kRows, kChunks = C::kChunks;
  for (int i = tid; i < kRows * kChunks; i += C::kThreads) {
    const int r = i / kChunks, c = i % kChunks;
    const int row = item.row_begin + r;
    if (row >= item.row_end) continue;
    float big = -INFINITY;
#pragma unroll
    for (int w = 0; w < C::WARPS_N; ++w) big = fmaxf(big, s_m[w * kRows + r]);
    float sum = 0.0f, acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
    for (int w = 0; w < C::WARPS_N; ++w) {
      const float wt = safe_exp2(s_m[w * kRows + r], big);
      sum += wt * s_l[w * kRows + r];
      const float* src = s_o + (w * kRows + r) * C::kOStride + c * 8;
#pragma unroll
      for (int e = 0; e < 8; ++e) acc[e] += wt * src[e];
    }
    const int token_in_req = row / group;
    const int head = kv_head * group + row % group;
    if (item.num_splits > 1) {
      const int64_t slot_row =
          static_cast<int64_t>(item.partial_base + token_in_req * item.num_splits + item.split) *
              p.num_heads +
          head;
      const float inv = sum > 0.0f ? v_scale / sum : 0.0f;
      uint4 packed;
      packed.x = pack2<T>(acc[0] * inv, acc[1] * inv);
      packed.y = pack2<T>(acc[2] * inv, acc[3] * inv);
      packed.z = pack2<T>(acc[4] * inv, acc[5] * inv);
      packed.w = pack2<T>(acc[6] * inv, acc[7] * inv);
      *reinterpret_cast<uint4*>(reinterpret_cast<T*>(partial_o) + slot_row * C::D + c * 8) = packed;
      if (c == 0) partial_lse[slot_row] = sum > 0.0f ? big + log2f(sum) : -INFINITY;
      continue;
    }
    float factor = sum > 0.0f ? v_scale / sum : 0.0f;
    if (p.sinks != nullptr) {
      // The sink joins the denominator: rescale both terms to a common maximum.
      const float sink = p.sinks[head] * kLog2e;
      const float ref = fmaxf(big, sink);
      const float denom = sum * safe_exp2(big, ref) + exp2f(sink - ref);
      factor = v_scale * safe_exp2(big, ref) / denom;
    }
    uint4 packed;
    packed.x = pack2<T>(acc[0] * factor, acc[1] * factor);
    packed.y = pack2<T>(acc[2] * factor, acc[3] * factor);
    packed.z = pack2<T>(acc[4] * factor, acc[5] * factor);
    packed.w = pack2<T>(acc[6] * factor, acc[7] * factor);
    T* out = static_cast<T*>(p.out) + (item.q_start + token_in_req) * p.o_token_stride +
             head * p.o_head_stride + c * 8;
    *reinterpret_cast<uint4*>(out) = packed;
  }
}

}  // namespace flash_steps

template <typename T, typename C>
__global__ void __launch_bounds__(C::kThreads, C::kMinCtas)
    flash_attention_kernel(PagedAttentionParams p, const CudaWorkItem* items, float* partial_o,
                           float* partial_lse, unsigned* split_counters, CacheUpdateParams fresh) {
  constexpr int D = C::D, BN = C::BN, WM = C::WM, kRows = C::kRows, STAGES = C::STAGES;
  constexpr int kNT = C::kWarpKeys / 8;  // n8 tiles of S per warp
  constexpr int kDT = D / 8;             // n8 tiles of O per warp
  constexpr bool kFp8 = C::kFp8;
  using namespace flash_steps;
  using KvLoader = FlashKvTileLoader<C>;
  constexpr int kPasses = KvLoader::kPasses;

  extern __shared__ __align__(16) unsigned char smem[];
  T* s_q = reinterpret_cast<T*>(smem);
  // What the tensor-core steps read: the stages (16-bit caches) or the converted tile (fp8).
  T* s_kv = s_q + kRows * D;
  // Where the tile loads land: the same stages, or (fp8) the stored tiles after sK/sV.
  unsigned char* s_staged = reinterpret_cast<unsigned char*>(s_kv) + C::kConvertedBytes;

  // Launched programmatically (sm_90, kernel_launch.cuh): this grid may start while the
  // previous one in the stream still runs. Until wait_for_previous_grid below it reads only
  // the step's metadata (work items, block table), which was uploaded before that grid
  // began; the next grid may start as soon as all CTAs of this one are running.
  let_next_grid_start();
  flash_trace(kTraceStart, threadIdx.x == 0);
  const int item_index = C::kKvHeadInX ? blockIdx.y : blockIdx.x;
  const CudaWorkItem item = items[item_index];
  const int kv_head = C::kKvHeadInX ? blockIdx.x : blockIdx.y;
  const int group = p.num_heads / p.num_kv_heads;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp % C::WARPS_M, wn = warp / C::WARPS_M;
  const int kv_begin = item.kv_begin, kv_end = item.kv_end;
  const int num_tiles = (kv_end - kv_begin + BN - 1) / BN;
  const int pos_base = item.kv_len - item.q_len;  // position of token 0

  const KvLoader kv_loader(p, item, kv_head, tid, smem_address(s_staged));
  // The first tiles' block ids (metadata: complete before the previous grid began).
  int first_blocks[STAGES - 1][kPasses];
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) kv_loader.lookup_blocks(s, first_blocks[s]);
  // Q, the new keys/values, the cache, the partials, the split counters and the output may
  // belong to the previous grid (the step's cache update, the previous step's attention,
  // the kernel that computed Q): wait for it to finish and flush. A no-op when the launch
  // was not programmatic.
  wait_for_previous_grid();
  flash_trace(kTraceWaited, tid == 0);

  load_q_tile<T, C>(p, item, kv_head, group, tid, s_q);
  if constexpr (!kFp8) {
    if (fresh.key != nullptr) write_fresh_kv<T, C>(fresh, item, kv_head, pos_base, tid);
  }
#pragma unroll
  for (int s = 0; s < STAGES - 1; ++s) {
    if (s < num_tiles) kv_loader.load_tile(s, s, first_blocks[s]);
    cp_async_commit();
  }
  // ahead[i]: the block ids of tile (the next to load) + i (kBlockLookahead).
  int ahead[kBlockLookahead][kPasses];
#pragma unroll
  for (int i = 0; i < kBlockLookahead; ++i) kv_loader.lookup_blocks(STAGES - 1 + i, ahead[i]);

  const FlashLaneAddresses addr =
      lane_tile_addresses<C>(smem_address(s_q), smem_address(s_kv), lane, wm, wn);
  constexpr int kQFrag = C::kQInRegs ? D / 16 : 1;
  uint32_t q_frag[WM][kQFrag][4];
  float q_unscale[2] = {1.0f, 1.0f};  // fp8 decode: Q's row scales (load_q_fragments_fp8)
  if constexpr (C::kQInRegs) {
    cp_async_wait<STAGES - 1>();  // the Q group (the STAGES - 1 tile groups may still fly)
    __syncthreads();
    if constexpr (C::kFp8Fragments) {
      load_q_fragments_fp8<T, C>(q_frag, q_unscale, s_q, lane);
    } else {
      load_q_fragments<C>(q_frag, addr.q);
    }
  }

  const int last_row = min(item.row_end, item.row_begin + kRows) - 1;
  const int pos_min = pos_base + item.row_begin / group;
  const int pos_max = pos_base + last_row / group;
  // Scores stay raw dot products until the exponent: exp2(s * scale_log2 - m), one FFMA.
  // Soft-cap maps s to cap/scale * tanh(s * scale / cap) first (same units).
  // An fp8 cache's k_scale joins the softmax scale (the dot products are of stored keys).
  const float scale = kFp8 ? p.scale * p.k_scale : p.scale;
  const float scale_log2 = scale * kLog2e;
  const bool soft_cap = p.soft_cap > 0.0f;
  const float cap_in = soft_cap ? scale / p.soft_cap : 0.0f;
  const float cap_out = soft_cap ? p.soft_cap / scale : 0.0f;

  float o[WM][kDT][4];
  float m[WM][2], l[WM][2];  // m in log2 units (s * scale_log2), -inf before any key
  init_softmax_state<C>(o, m, l);

  int stage = 0, load_stage = STAGES - 1;
  for (int tile = 0; tile < num_tiles; ++tile) {
    // The tile's K/V have landed; the next tile's copies go out. (Warp-private tiles: this
    // warp's own copies, so a warp barrier makes them visible to its lanes.)
    cp_async_wait<STAGES - 2>();
    if constexpr (C::kWarpPrivateKv) {
      __syncwarp();
    } else {
      __syncthreads();
    }
    if (tile == 0) flash_trace(kTraceFirstTile, tid == 0);
    if (tile + STAGES - 1 < num_tiles) {
      if constexpr (kBlockLookahead == 1) {
        kv_loader.load_tile(tile + STAGES - 1, load_stage, ahead[0]);
        kv_loader.lookup_blocks(tile + STAGES, ahead[0]);
      } else {
        int blocks[kPasses];
#pragma unroll
        for (int pass = 0; pass < kPasses; ++pass) blocks[pass] = ahead[0][pass];
#pragma unroll
        for (int i = 0; i + 1 < kBlockLookahead; ++i) {
#pragma unroll
          for (int pass = 0; pass < kPasses; ++pass) ahead[i][pass] = ahead[i + 1][pass];
        }
        kv_loader.lookup_blocks(tile + STAGES - 1 + kBlockLookahead, ahead[kBlockLookahead - 1]);
        kv_loader.load_tile(tile + STAGES - 1, load_stage, blocks);
      }
    }
    cp_async_commit();
    load_stage = load_stage + 1 == STAGES ? 0 : load_stage + 1;

    uint32_t stage_off = static_cast<uint32_t>(stage) * KvLoader::kStageBytes;
    const unsigned char* staged = s_staged + stage_off;  // fp8 decode: the staged K, V tiles
    if constexpr (kFp8 && !C::kFp8Fragments) {
      convert_fp8_tile<T, C>(staged, s_kv, 0, BN, tid, C::kThreads);
      __syncthreads();
      stage_off = 0;  // the tensor-core steps read the converted tile
    }
    stage = stage + 1 == STAGES ? 0 : stage + 1;
    const int kb = kv_begin + tile * BN;

    float s[WM][kNT][4];
    if constexpr (C::kFp8Fragments) {
      compute_qk_fp8<C>(s, q_frag, q_unscale, staged, lane, wn);
    } else {
      compute_qk<T, C>(s, q_frag, addr.q, addr.k, stage_off);
    }
    if (soft_cap) apply_soft_cap<C>(s, cap_in, cap_out);
    // Mask only tiles that straddle a boundary (kv_end, the causal diagonal, a window edge
    // or a chunk).
    const bool need_mask =
        kb + BN > kv_end ||
        (p.causal && (kb + BN - 1 > pos_min || p.chunk_size > 0 ||
                      (p.sliding_window > 0 && kb <= pos_max - p.sliding_window)));
    if (need_mask) {
      mask_scores<C>(s, p, item.row_begin, group, pos_base, kv_end, kb, lane, wm, wn);
    }
    float alpha[WM][2];
    online_softmax_update<C>(s, m, l, alpha, scale_log2);
    rescale_o<C>(o, alpha);
    if constexpr (C::kFp8Fragments) {
      accumulate_pv_fp8<C>(o, s, staged + KvLoader::kTileBytes, lane, wn);
    } else {
      accumulate_pv<T, C>(o, s, addr.v, stage_off);
    }
  }

  // Epilogue: every warp parks (m, l, O) in shared memory, then all threads merge the
  // WARPS_N states of each row and write the output (or the split-KV partial).
  cp_async_wait<0>();
  __syncthreads();
  flash_trace(kTraceLoopDone, tid == 0);
  float* s_o = reinterpret_cast<float*>(smem);
  float* s_m = s_o + C::WARPS_N * kRows * C::kOStride;
  float* s_l = s_m + C::WARPS_N * kRows;
  store_warp_state<C>(s_o, s_m, s_l, o, m, l, item, lane, wm, wn);
  __syncthreads();
  write_output<T, C>(p, item, kv_head, group, tid, s_o, s_m, s_l, partial_o, partial_lse,
                     kFp8 ? p.v_scale : 1.0f);
  flash_trace(kTraceResultWritten, tid == 0);
  if (item.num_splits <= 1) return;
  const SplitMergeArgs merge_args{p.out,           p.sinks,     p.o_token_stride,
                                  p.o_head_stride, p.num_heads, p.num_kv_heads};
  split_kv_merge_if_last<T, C>(merge_args, items + item_index, kv_head, partial_o, partial_lse,
                               split_counters, smem);
}

}  // namespace attnkit::cuda
