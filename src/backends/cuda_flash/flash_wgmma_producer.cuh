#pragma once
// The Hopper prefill kernel's (flash_wgmma_kernel.cuh) producer warpgroup: the K/V tiles of
// a work item into the ring of stages, by the copy engine (tensor maps) or by cp.async.

#include <cuda.h>

#include "backends/cuda_flash/flash_kernels.h"
#include "backends/cuda_flash/flash_trace.cuh"
#include "backends/cuda_flash/flash_wgmma_config.cuh"
#include "kernels/cuda/fp8_convert.cuh"
#include "kernels/cuda/mma_primitives.cuh"
#include "kernels/cuda/wgmma_primitives.cuh"

namespace attnkit::cuda {

// The K and V caches as tensor maps for the copy engine (TMA, cuTensorMapEncodeTiled on the
// host): four dimensions, innermost first: the head dimension (boxes of 64 elements = 128
// bytes, 128-byte swizzle: the layout the wgmma descriptors read), then the slot in the
// block and the KV head in the order of their strides (HND: slot first; NHD: head first),
// then the block. A box is box_rows keys: the block size, or BN when blocks are larger.
// box_rows == 0: no maps (contiguous caches, or strides, alignment or block sizes the copy
// engine cannot take), every tile by cp.async.
// With kFold, fresh_k / fresh_v map the step's K and V inputs: three dimensions, the head
// dimension (boxes of 64 elements, 128-byte swizzle), the KV head and the token; a box is
// one KV head's rows of BN consecutive tokens. fresh_rows: BN, or 0 when they are not
// mapped (no fold, or strides or alignment the copy engine cannot take) and the step's own
// keys go by cp.async.
// q maps the queries the same way (three dimensions: head dimension, query head, token); a
// box is 64 packed rows, 64 / group tokens of one KV head's group query heads. q_rows: 64, or
// 0 when Q is not mapped (the rows are then loaded by cp.async, WgmmaConsumer::load_q).
// write_k / write_v (kFold, kWgmmaWriteTma) map the caches as k / v do, with boxes of
// kWriteBoxRows keys whatever the configuration, for the folded write's stores
// (store_own_passes); write_slot_dim is their slot dimension, write_rows kWriteBoxRows, or 0
// when they are not mapped (no fold, contiguous caches, blocks of fewer keys, layouts the
// copy engine cannot take) and every own key is stored by the producer threads.
inline constexpr int kWriteBoxRows = 16;
struct WgmmaKvMaps {
  CUtensorMap k, v;
  CUtensorMap fresh_k, fresh_v;
  CUtensorMap q;
  CUtensorMap o;  // the output, as q (o_rows: 64, or 0 when not mapped)
  CUtensorMap write_k, write_v;
  int box_rows;
  int slot_dim;  // 1 or 2: the map dimension of the slot (the KV head's is 3 - slot_dim)
  int fresh_rows;
  int q_rows;
  int o_rows;
  int write_rows;
  int write_slot_dim;
};

// One whole tile of a paged cache (C::kCopyEngine), keys [kb, kb + BN), into `stage`: lane
// b < BN / box_rows of warp 0 looks up box b's block and issues its loads, one per
// 64-column slab; lane 0 first announces the tile's bytes on the stage's "full" barrier,
// and every other producer thread makes a plain arrival, so that the barrier counts 128
// arrivals as for a tile copied by cp.async. Every thread first waits until the stage is
// free (`reuse`: not the stage's first use).
template <typename C>
__device__ __forceinline__ void produce_tile_by_copy_engine(
    const int32_t* block_row, int block_size, int box_rows, int kb, int kv_head, int stage,
    uint32_t reuse_parity, bool reuse, const WgmmaSmem<C>& smem, const WgmmaKvMaps& maps) {
  using namespace sm90;
  const int tid = threadIdx.x;
  const int boxes = C::BN / box_rows;
  // Box tid's block and first slot (0 unless blocks are larger than a tile).
  int box_block = 0, box_slot = 0;
  if (tid < boxes) {
    const int key = kb + tid * box_rows;
    const int logical = key / block_size;
    box_block = block_row[logical];
    box_slot = key - logical * block_size;
  }
  const uint32_t stage_base = smem.stage_base(stage);
#pragma unroll
  for (int part = 0; part < 2; ++part) {
    const uint32_t full = smem.full(part, stage);
    if (reuse) mbarrier_wait(smem.empty(part, stage), reuse_parity);
    if (tid == 0) mbarrier_arrive_expect_tx(full, C::kTileBytes);
    if (tid < 32) __syncwarp();
    if (tid < boxes) {
      const void* map = part == 0 ? static_cast<const void*>(&maps.k) : &maps.v;
      const int c1 = maps.slot_dim == 1 ? box_slot : kv_head;
      const int c2 = maps.slot_dim == 1 ? kv_head : box_slot;
      const uint32_t dst =
          stage_base + part * C::kTileBytes + static_cast<uint32_t>(tid * box_rows) * 128u;
#pragma unroll
      for (int j = 0; j < C::kSlabs; ++j) {
        tma_load_4d(dst + j * C::kSlabBytes, map, j * 64, c1, c2, box_block, full);
      }
    }
    if (tid != 0) mbarrier_arrive(full);
  }
}

// A paged cache read in passes of 16 keys that each lie in one block (blocks of a multiple
// of 16 keys, the item's first key a multiple of 16), with a block's stride and its slots'
// offsets below 4 GiB: the producer's whole tiles then need, per pass and cache, one
// block-table entry and one 32 x 32 -> 64-bit multiply-add, and no per-key test
// (produce_whole_tile_by_passes).
struct PassAddressing {
  const char* k_thread;  // this thread's chunk of its key's K row in block 0, slot 0
  const char* v_thread;
  uint32_t k_block_bytes, v_block_bytes;
  uint32_t k_token_bytes, v_token_bytes;
};

// Whether an item's whole tiles of a paged cache of T can be read in passes of 16 keys
// (PassAddressing's conditions; produce_kv_tiles spells them out in place, where a call
// changed the 16-bit kernels' machine code and time).
template <typename T>
__device__ __forceinline__ bool by_passes_possible(const PagedAttentionParams& p,
                                                   const int32_t* block_row, int block_size,
                                                   int kv_begin) {
  constexpr int64_t kBytes = sizeof(T), kMax32 = 0xffffffffLL;
  return block_row != nullptr && block_size % 16 == 0 && kv_begin % 16 == 0 &&
         p.k_block_stride * kBytes <= kMax32 && p.v_block_stride * kBytes <= kMax32 &&
         p.k_token_stride * kBytes * block_size <= kMax32 &&
         p.v_token_stride * kBytes * block_size <= kMax32;
}

// PassAddressing for the thread whose chunks start at k_base / v_base (head and chunk
// folded in) and whose key is key_in_group of each group of 16 keys.
template <typename T>
__device__ __forceinline__ PassAddressing make_pass_addressing(const PagedAttentionParams& p,
                                                               const T* k_base, const T* v_base,
                                                               int key_in_group) {
  constexpr int64_t kBytes = sizeof(T);
  PassAddressing a;
  a.k_token_bytes = static_cast<uint32_t>(p.k_token_stride * kBytes);
  a.v_token_bytes = static_cast<uint32_t>(p.v_token_stride * kBytes);
  a.k_thread = reinterpret_cast<const char*>(k_base) + key_in_group * a.k_token_bytes;
  a.v_thread = reinterpret_cast<const char*>(v_base) + key_in_group * a.v_token_bytes;
  a.k_block_bytes = static_cast<uint32_t>(p.k_block_stride * kBytes);
  a.v_block_bytes = static_cast<uint32_t>(p.v_block_stride * kBytes);
  return a;
}

// The block-table rows and first slots of a whole tile's kGroups groups of 16 keys, each in
// one block; `block` and `slot` are those of the tile's first key, stepped here to the next
// tile's (no division, no per-key test).
template <int kGroups>
__device__ __forceinline__ void whole_tile_groups(const int32_t* block_row, int block_size,
                                                  int& block, int& slot, uint32_t (&row)[kGroups],
                                                  int (&group_slot)[kGroups]) {
#pragma unroll
  for (int g = 0; g < kGroups; ++g) {
    row[g] = static_cast<uint32_t>(block_row[block]);
    group_slot[g] = slot;
    slot += 16;
    if (slot == block_size) {
      slot = 0;
      ++block;
    }
  }
}

// One whole tile (keys [kb, kb + BN), all before kv_end) by cp.async in passes of 16 keys
// (PassAddressing): `block` and `slot` are the block index and slot of key kb, stepped
// here to those of kb + BN. Copies as produce_kv_tiles' general path (the same threads,
// chunks and barriers), without its per-key walk, 64-bit products and zero-fill tests:
// that path's address arithmetic was ~60 instructions per pass and cache at head size 128
// (sm_90a machine code), a third of the producer's instructions.
template <typename C>
__device__ __forceinline__ void produce_whole_tile_by_passes(
    const int32_t* block_row, int block_size, int& block, int& slot, uint32_t stage_dst, int stage,
    bool reuse, uint32_t reuse_parity, const PassAddressing& a, const WgmmaSmem<C>& smem) {
  using namespace sm90;
  constexpr int kPasses = C::BN / 16;
  uint32_t row[kPasses];
  int pass_slot[kPasses];
  whole_tile_groups(block_row, block_size, block, slot, row, pass_slot);
#pragma unroll
  for (int part = 0; part < 2; ++part) {
    const uint32_t empty = (part == 0 ? smem.empty_k : smem.empty_v) + 8u * stage;
    if (reuse) mbarrier_wait(empty, reuse_parity);
    const char* base = part == 0 ? a.k_thread : a.v_thread;
    const uint32_t block_bytes = part == 0 ? a.k_block_bytes : a.v_block_bytes;
    const uint32_t token_bytes = part == 0 ? a.k_token_bytes : a.v_token_bytes;
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) {
      const uint64_t offset = static_cast<uint64_t>(row[pass]) * block_bytes +
                              static_cast<uint32_t>(pass_slot[pass]) * token_bytes;
      const char* src = base + offset;
      const uint32_t dst = stage_dst + part * C::kTileBytes + pass * 16u * 128u;
      if constexpr ((kWgmmaAblate & 4) == 0) {
#pragma unroll
        for (int j = 0; j < C::kSlabs; ++j) cp_async_16(dst + j * C::kSlabBytes, src + j * 128, 16);
      }
    }
    cp_async_arrive_noinc((part == 0 ? smem.full_k : smem.full_v) + 8u * stage);
  }
}

// The step's own keys read from its inputs (kFold, see produce_kv_tiles): one whole tile,
// keys [kb, kb + BN), all of them new, by cp.async in passes of 16 keys as
// produce_whole_tile_by_passes, from the rows of tokens token0 .. token0 + BN - 1 of the
// step's K and V inputs (this thread's chunk of token0's rows at k_row / v_row; a pass
// steps 16 tokens).
template <typename C>
__device__ __forceinline__ void produce_whole_tile_from_inputs(
    const char* k_row, const char* v_row, int64_t k_pass_bytes, int64_t v_pass_bytes,
    uint32_t stage_dst, int stage, bool reuse, uint32_t reuse_parity, const WgmmaSmem<C>& smem) {
  using namespace sm90;
  constexpr int kPasses = C::BN / 16;
#pragma unroll
  for (int part = 0; part < 2; ++part) {
    if (reuse) mbarrier_wait(smem.empty(part, stage), reuse_parity);
    const char* src = part == 0 ? k_row : v_row;
    const int64_t pass_bytes = part == 0 ? k_pass_bytes : v_pass_bytes;
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) {
      const uint32_t dst = stage_dst + part * C::kTileBytes + pass * 16u * 128u;
#pragma unroll
      for (int j = 0; j < C::kSlabs; ++j) cp_async_16(dst + j * C::kSlabBytes, src + j * 128, 16);
      src += pass_bytes;
    }
    cp_async_arrive_noinc(smem.full(part, stage));
  }
}

// The step's own keys by the copy engine (kFold, maps.fresh_rows == BN): one whole tile,
// keys [kb, kb + BN), all of them new, the rows of tokens token0 .. token0 + BN - 1 of the
// step's K and V inputs. Thread 0 announces each part's bytes on the stage's "full" barrier
// and issues its boxes (one per 64-column slab); every other producer thread makes a plain
// arrival, so the barrier counts 128 arrivals as for a tile copied by cp.async. Two copies
// per part where cp.async takes BN / 16 * kSlabs per thread.
template <typename C>
__device__ __forceinline__ void produce_tile_from_inputs_by_copy_engine(
    int token0, int kv_head, int stage, uint32_t reuse_parity, bool reuse, const WgmmaSmem<C>& smem,
    const WgmmaKvMaps& maps) {
  using namespace sm90;
#pragma unroll
  for (int part = 0; part < 2; ++part) {
    const uint32_t full = smem.full(part, stage);
    if (reuse) mbarrier_wait(smem.empty(part, stage), reuse_parity);
    if (threadIdx.x == 0) {
      mbarrier_arrive_expect_tx(full, C::kTileBytes);
      const void* map = part == 0 ? static_cast<const void*>(&maps.fresh_k) : &maps.fresh_v;
#pragma unroll
      for (int j = 0; j < C::kSlabs; ++j) {
        tma_load_3d(smem.stage_base(stage) + part * C::kTileBytes + j * C::kSlabBytes, map, j * 64,
                    kv_head, token0, full);
      }
    } else {
      mbarrier_arrive(full);
    }
  }
}

// The folded cache write (kFold): this thread's chunks of the K and V rows of the item's own
// tokens (those of its rows: [own_begin, own_end) in key positions) that lie in tile `tile`,
// keys [kb, kb + BN), into their cache slots. `resident`: the tile's stage still holds it
// and its copies have landed (the caller waited on the stage's "full" barriers, which
// also covers a tile brought by the copy engine), and the chunks are read back from there,
// one 16-byte shared-memory load per store; otherwise they are
// read again from the inputs (a tile the ring has since reused: only where the own keys
// span more tiles than there are stages, head size 256 after cached context).
// Passes whose bit is set in `stored` were stored by the copy engine (store_own_passes).
template <typename T, typename C>
__device__ __forceinline__ void write_own_rows(const CacheUpdateParams& fresh,
                                               const CudaWorkItem& item, int kv_head, int kb,
                                               int own_begin, int own_end, int pos_base,
                                               uint32_t stage_dst, bool resident, int key_in_pass,
                                               int sub, uint32_t stored) {
  constexpr int kPasses = C::BN / 16;
  // Every pass's slot first: one round trip for the tile, not one per pass.
  int64_t slots[kPasses];
#pragma unroll
  for (int pass = 0; pass < kPasses; ++pass) {
    const int kpos = kb + pass * 16 + key_in_pass;
    const bool own = kpos >= own_begin && kpos < own_end && ((stored >> pass) & 1u) == 0;
    slots[pass] = own ? fresh.slot_mapping[item.q_start + kpos - pos_base] : -1;
  }
#pragma unroll
  for (int pass = 0; pass < kPasses; ++pass) {
    const int64_t slot = slots[pass];
    if (slot < 0) continue;  // not an own key of this tile, or a padding token
    const int token = item.q_start + kb + pass * 16 + key_in_pass - pos_base;
    const int64_t block = slot / fresh.block_size, offset = slot - block * fresh.block_size;
#pragma unroll
    for (int part = 0; part < 2; ++part) {
      T* dst =
          static_cast<T*>(part == 0 ? fresh.k_cache : fresh.v_cache) +
          block * (part == 0 ? fresh.k_block_stride : fresh.v_block_stride) +
          offset * (part == 0 ? fresh.k_token_stride : fresh.v_token_stride) +
          static_cast<int64_t>(kv_head) * (part == 0 ? fresh.k_head_stride : fresh.v_head_stride) +
          sub * 8;
      const T* src = static_cast<const T*>(part == 0 ? fresh.key : fresh.value) +
                     token * (part == 0 ? fresh.key_token_stride : fresh.value_token_stride) +
                     static_cast<int64_t>(kv_head) *
                         (part == 0 ? fresh.key_head_stride : fresh.value_head_stride) +
                     sub * 8;
      const uint32_t at = stage_dst + part * C::kTileBytes + pass * 16u * 128u;
#pragma unroll
      for (int j = 0; j < C::kSlabs; ++j) {
        uint4 w;
        if (resident) {
          asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                       : "=r"(w.x), "=r"(w.y), "=r"(w.z), "=r"(w.w)
                       : "r"(at + j * C::kSlabBytes));
        } else {
          w = *reinterpret_cast<const uint4*>(src + j * 64);
        }
        *reinterpret_cast<uint4*>(dst + j * 64) = w;
      }
    }
  }
}

// The folded write of a resident tile's passes by the copy engine (kWgmmaWriteTma, maps.
// write_rows == kWriteBoxRows == 16 keys a pass). Every lane of a producer warp first loads
// the slots of the tile's keys kb + 32 r + lane (r < BN / 32; -1 for keys that are not own
// keys, [own_begin, own_end)), all of them before the caller waits for the tile
// (own_pass_slots); each warp finds the same passes from them, so no barrier is needed.
template <typename C>
struct OwnPassSlots {
  int64_t slot[C::BN / 32];
};
template <typename C>
__device__ __forceinline__ OwnPassSlots<C> own_pass_slots(const CacheUpdateParams& fresh,
                                                          const CudaWorkItem& item, int kb,
                                                          int own_begin, int own_end,
                                                          int pos_base) {
  OwnPassSlots<C> slots;
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int round = 0; round < C::BN / 32; ++round) {
    const int key = kb + round * 32 + lane;
    const bool own = key >= own_begin && key < own_end;
    slots.slot[round] = own ? fresh.slot_mapping[item.q_start + key - pos_base] : -1;
  }
  return slots;
}

// Then a pass qualifies when each of its 16 keys has a slot, the slots consecutive and
// inside one block: the mask of those passes is returned, and thread 0 stores them from the
// stage (K and V, one box per 64-column slab: the stage's slabs hold the rows in the
// 128-byte-swizzled layout the maps store from) as one bulk group, which the caller waits
// for (bulk_wait_read) before the CTA leaves or its shared memory is reused. The stage must
// hold rows the copy engine loaded (the async proxy wrote them; the caller waited on the
// stage's "full" barriers).
template <typename C>
__device__ __forceinline__ uint32_t store_own_passes(const OwnPassSlots<C>& slots,
                                                     int64_t block_size, int kv_head,
                                                     uint32_t stage_base, const WgmmaKvMaps& maps) {
  using namespace sm90;
  static_assert(C::BN % 32 == 0 && kWriteBoxRows == 16, "two passes of 16 keys per round");
  constexpr unsigned kAll = 0xffffffffu;
  const int lane = threadIdx.x & 31;
  uint32_t stored = 0;
#pragma unroll
  for (int round = 0; round < C::BN / 32; ++round) {
    const int64_t slot = slots.slot[round];
    const int64_t first = __shfl_sync(kAll, slot, lane & 16);  // its pass's first slot
    const bool fits = lane % 16 != 0 || first % block_size <= block_size - kWriteBoxRows;
    const uint32_t votes = __ballot_sync(kAll, slot >= 0 && slot == first + lane % 16 && fits);
    const uint32_t passes =
        ((votes & 0xffffu) == 0xffffu ? 1u : 0u) | (votes >> 16 == 0xffffu ? 2u : 0u);
    stored |= passes << (2 * round);
    const int64_t pass_first[2] = {__shfl_sync(kAll, slot, 0), __shfl_sync(kAll, slot, 16)};
    if (threadIdx.x != 0) continue;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      if (((passes >> half) & 1u) == 0) continue;
      const int block = static_cast<int>(pass_first[half] / block_size);
      const int in_block = static_cast<int>(pass_first[half] - block * block_size);
      const int c1 = maps.write_slot_dim == 1 ? in_block : kv_head;
      const int c2 = maps.write_slot_dim == 1 ? kv_head : in_block;
      const uint32_t rows = stage_base + static_cast<uint32_t>(round * 32 + half * 16) * 128u;
#pragma unroll
      for (int part = 0; part < 2; ++part) {
        const void* map = part == 0 ? static_cast<const void*>(&maps.write_k) : &maps.write_v;
#pragma unroll
        for (int j = 0; j < C::kSlabs; ++j) {
          tma_store_4d(map, rows + part * C::kTileBytes + j * C::kSlabBytes, j * 64, c1, c2, block);
        }
      }
    }
  }
  if (threadIdx.x == 0 && stored != 0) bulk_commit();
  return stored;
}

// The producer warpgroup: every K/V tile of the item into the ring of stages. With
// C::kCopyEngine, whole tiles of a paged cache whose first key starts a box go by the copy
// engine (produce_tile_by_copy_engine). The others by cp.async: 8 threads per key (16 keys
// per pass), thread `sub` copies 16-byte chunk `sub` of every 64-column slab of its key's K
// and V rows, so one warp instruction reads four whole 128-byte lines. Whole tiles of
// paged caches that PassAddressing can describe go by produce_whole_tile_by_passes; the
// rest (the last, partial tile; contiguous caches; other block sizes) by the general path
// below, which walks each key's block and slot and zero-fills keys past kv_end.
// kFold (a step whose cache update this launch does, fresh.key set): the step's own keys
// (positions from kv_len - q_len on) are not in the cache yet and come from the inputs,
// whole tiles of them by produce_whole_tile_from_inputs, so that no CTA reads a slot
// another writes; after its last copies the producer writes the K/V rows of the item's
// own tokens (its rows' tokens, within its key range) into the cache, from the stages
// they were copied into (write_own_rows), while the consumers finish the last tiles.
template <typename T, typename C, bool kFold>
__device__ __forceinline__ void produce_kv_tiles(const PagedAttentionParams& p,
                                                 const CacheUpdateParams& fresh,
                                                 const CudaWorkItem& item, int kv_head,
                                                 const WgmmaSmem<C>& smem,
                                                 const WgmmaKvMaps& maps) {
  using namespace sm90;
  constexpr int BN = C::BN, STAGES = C::STAGES, kSlabs = C::kSlabs;
  const int tid = threadIdx.x;
  const int kv_begin = item.kv_begin, kv_end = item.kv_end;
  const int num_tiles = (kv_end - kv_begin + BN - 1) / BN;
  const int sub = tid & 7, key_in_pass = tid >> 3;
  const uint32_t dst_key = smem.base + C::kKvOffset + static_cast<uint32_t>(key_in_pass) * 128u +
                           static_cast<uint32_t>((sub ^ (key_in_pass & 7)) << 4);
  const T* k_base =
      static_cast<const T*>(p.k_cache) + static_cast<int64_t>(kv_head) * p.k_head_stride + sub * 8;
  const T* v_base =
      static_cast<const T*>(p.v_cache) + static_cast<int64_t>(kv_head) * p.v_head_stride + sub * 8;
  const int32_t* block_row =
      p.block_table != nullptr
          ? p.block_table + static_cast<int64_t>(item.seq) * p.block_table_stride
          : nullptr;
  const int64_t contiguous_row = p.block_table != nullptr ? 0 : p.kv_start_loc[item.seq];
  // Block index and slot of this thread's key of the current pass (paged caches; the
  // contiguous case ignores them).
  const int first_key = kv_begin + key_in_pass;
  const int block_size = block_row != nullptr ? p.block_size : 1 << 30;
  int walk_block = first_key / block_size;
  int walk_slot = first_key - walk_block * block_size;
  // The copy engine's and produce_whole_tile_by_passes' tiles leave the walk behind; it is
  // set again at the next tile of the general path.
  const int box_rows = C::kCopyEngine && block_row != nullptr ? maps.box_rows : 0;
  bool walk_stale = false;
  constexpr int64_t kBytes = sizeof(T), kMax32 = 0xffffffffLL;
  const bool by_passes = block_row != nullptr && block_size % 16 == 0 && kv_begin % 16 == 0 &&
                         p.k_block_stride * kBytes <= kMax32 &&
                         p.v_block_stride * kBytes <= kMax32 &&
                         p.k_token_stride * kBytes * block_size <= kMax32 &&
                         p.v_token_stride * kBytes * block_size <= kMax32;
  PassAddressing pass_addr{};
  int pass_block = 0, pass_slot = 0, pass_next_key = -1;  // the key pass_block/slot is at
  if (by_passes) pass_addr = make_pass_addressing(p, k_base, v_base, key_in_pass);
  // kFold: keys from fresh_from on come from the inputs (this thread's chunk of the row of
  // the step's token `token` at fresh_k + token * key_token_stride); cache_end is where
  // the keys read from the cache end.
  const int pos_base = item.kv_len - item.q_len;
  const int fresh_from = kFold ? (pos_base > kv_begin ? pos_base : kv_begin) : kv_end;
  const int cache_end = kFold ? fresh_from : kv_end;
  const T* fresh_k = nullptr;
  const T* fresh_v = nullptr;
  if constexpr (kFold) {
    fresh_k = static_cast<const T*>(fresh.key) +
              static_cast<int64_t>(kv_head) * fresh.key_head_stride + sub * 8;
    fresh_v = static_cast<const T*>(fresh.value) +
              static_cast<int64_t>(kv_head) * fresh.value_head_stride + sub * 8;
  }
  // Whether the whole tile of keys [kb, kb + BN) comes from the step's inputs by the copy
  // engine (kFold): the loads below, and the folded write that may store it from its stage.
  const auto inputs_by_copy_engine = [&](int kb) {
    return kFold && (kWgmmaAblate & 4) == 0 && kb >= fresh_from && kb + BN <= kv_end &&
           maps.fresh_rows == BN;
  };
  for (int tile = 0; tile < num_tiles; ++tile) {
    const int stage = tile % STAGES;
    const uint32_t reuse_parity = ((tile / STAGES) + 1) & 1;  // the stage's previous use
    const int kb = kv_begin + tile * BN;
    if constexpr (C::kCopyEngine) {
      if (box_rows > 0 && kb + BN <= cache_end && kb % box_rows == 0) {
        produce_tile_by_copy_engine<C>(block_row, block_size, box_rows, kb, kv_head, stage,
                                       reuse_parity, tile >= STAGES, smem, maps);
        walk_stale = true;
        continue;
      }
    }
    const uint32_t stage_dst = dst_key + static_cast<uint32_t>(stage) * 2u * C::kTileBytes;
    if constexpr (kFold) {
      if (inputs_by_copy_engine(kb)) {
        produce_tile_from_inputs_by_copy_engine<C>(item.q_start + kb - pos_base, kv_head, stage,
                                                   reuse_parity, tile >= STAGES, smem, maps);
        walk_stale = true;
        continue;
      }
      if (kb >= fresh_from && kb + BN <= kv_end) {
        const int64_t token = item.q_start + kb + key_in_pass - pos_base;
        produce_whole_tile_from_inputs<C>(
            reinterpret_cast<const char*>(fresh_k + token * fresh.key_token_stride),
            reinterpret_cast<const char*>(fresh_v + token * fresh.value_token_stride),
            16 * fresh.key_token_stride * kBytes, 16 * fresh.value_token_stride * kBytes, stage_dst,
            stage, tile >= STAGES, reuse_parity, smem);
        walk_stale = true;
        continue;
      }
    }
    if (by_passes && kb + BN <= cache_end) {
      if (kb != pass_next_key) {
        pass_block = kb / block_size;
        pass_slot = kb - pass_block * block_size;
      }
      produce_whole_tile_by_passes<C>(block_row, block_size, pass_block, pass_slot, stage_dst,
                                      stage, tile >= STAGES, reuse_parity, pass_addr, smem);
      pass_next_key = kb + BN;
      walk_stale = true;
      continue;
    }
    if (walk_stale) {
      walk_block = (kb + key_in_pass) / block_size;
      walk_slot = kb + key_in_pass - walk_block * block_size;
      walk_stale = false;
    }
    // Where this thread's key of each pass lives: (row, slot) with the element offset
    // row * row_stride + slot * token_stride; row -1 for keys past kv_end, -2 - token for
    // the step's own keys read from the inputs (kFold). Contiguous caches use the token
    // index as the row (row stride = token stride, slot 0). The paged position (block
    // index, slot) is stepped 16 keys per pass, no division.
    int32_t key_row[BN / 16], key_slot[BN / 16];
#pragma unroll
    for (int pass = 0; pass < BN / 16; ++pass) {
      const int kpos = kb + pass * 16 + key_in_pass;
      key_row[pass] = -1;
      key_slot[pass] = block_row != nullptr ? walk_slot : 0;
      if (kFold && kpos >= fresh_from && kpos < kv_end) {
        key_row[pass] = -2 - (item.q_start + kpos - pos_base);
      } else if (kpos < kv_end) {
        key_row[pass] = block_row != nullptr ? block_row[walk_block]
                                             : static_cast<int32_t>(contiguous_row + kpos);
      }
      walk_slot += 16;
      while (walk_slot >= block_size) {
        walk_slot -= block_size;
        ++walk_block;
      }
    }
    // K, then V, each behind its own pair of barriers.
#pragma unroll
    for (int part = 0; part < 2; ++part) {
      const uint32_t empty = (part == 0 ? smem.empty_k : smem.empty_v) + 8u * stage;
      if (tile >= STAGES) mbarrier_wait(empty, reuse_parity);
      const T* src_base = part == 0 ? k_base : v_base;
      const int64_t token_stride = part == 0 ? p.k_token_stride : p.v_token_stride;
      const int64_t row_stride = block_row == nullptr ? token_stride
                                 : part == 0          ? p.k_block_stride
                                                      : p.v_block_stride;
#pragma unroll
      for (int pass = 0; pass < BN / 16; ++pass) {
        const uint32_t dst = stage_dst + part * C::kTileBytes + pass * 16u * 128u;
        if constexpr (kFold) {
          // Out-of-range keys zero-fill (src-size 0) from a valid address.
          const int32_t row = key_row[pass];
          const T* src =
              row >= 0   ? src_base + row * row_stride + key_slot[pass] * token_stride
              : row < -1 ? (part == 0 ? fresh_k : fresh_v) +
                               static_cast<int64_t>(-2 - row) *
                                   (part == 0 ? fresh.key_token_stride : fresh.value_token_stride)
                         : src_base;
          const int bytes = row != -1 ? 16 : 0;
#pragma unroll
          for (int j = 0; j < kSlabs; ++j) {
            cp_async_16(dst + j * C::kSlabBytes, src + j * 64, bytes);
          }
        } else {
          // Out-of-range keys zero-fill (src-size 0) from a valid address.
          const bool valid = key_row[pass] >= 0;
          const int64_t off =
              valid ? key_row[pass] * row_stride + key_slot[pass] * token_stride : 0;
          const int bytes = valid ? 16 : 0;
          if constexpr ((kWgmmaAblate & 4) == 0) {
#pragma unroll
            for (int j = 0; j < kSlabs; ++j) {
              cp_async_16(dst + j * C::kSlabBytes, src_base + off + j * 64, bytes);
            }
          }
        }
      }
      cp_async_arrive_noinc((part == 0 ? smem.full_k : smem.full_v) + 8u * stage);
    }
  }
  flash_trace(kTraceLoadsIssued, threadIdx.x == 0);
  cp_async_wait<0>();
  if constexpr (kFold) {
    // This thread's copies have all landed (cp.async.wait_all: the copies above are
    // tracked by the stages' barriers, in no commit group).
    cp_async_commit();
    cp_async_wait<0>();
    // The item's own tokens: those of its rows (a token whose query heads straddle two row
    // tiles is written by both, the same bytes), within its key range (a split item writes
    // those of its own range only; causal, so they end the range).
    const int group = p.num_heads / p.num_kv_heads;
    const int own_lo = pos_base + item.row_begin / group;
    const int own_hi = pos_base + (item.row_end - 1) / group + 1;
    const int own_begin = own_lo > kv_begin ? own_lo : kv_begin;
    const int own_end = own_hi < kv_end ? own_hi : kv_end;
    if (own_begin < own_end) {
      bool any_stored = false;
#pragma unroll 1
      for (int tile = (own_begin - kv_begin) / BN; tile < num_tiles; ++tile) {
        const int stage = tile % STAGES;
        const int kb = kv_begin + tile * BN;
        const uint32_t stage_dst = dst_key + static_cast<uint32_t>(stage) * 2u * C::kTileBytes;
        const bool resident = tile >= num_tiles - STAGES;
        // The copy engine stores whole passes of a resident tile it loaded (the condition
        // of the loop above); their slots are read before the wait.
        const bool by_engine = kWgmmaWriteTma && resident && maps.write_rows == kWriteBoxRows &&
                               inputs_by_copy_engine(kb);
        OwnPassSlots<C> pass_slots;
        if (by_engine)
          pass_slots = own_pass_slots<C>(fresh, item, kb, own_begin, own_end, pos_base);
        if (resident) {
          // A tile the copy engine brought is read back once its stage's phases are done
          // (a cp.async tile's own chunks have landed already; the wait returns at once).
          const uint32_t parity = (tile / STAGES) & 1;
          mbarrier_wait(smem.full_k + 8u * stage, parity);
          mbarrier_wait(smem.full_v + 8u * stage, parity);
          if (tile == num_tiles - 1) flash_trace(kTraceOwnTilesIn, threadIdx.x == 0);
        }
        uint32_t stored = 0;
        if (by_engine) {
          stored = store_own_passes<C>(pass_slots, fresh.block_size, kv_head,
                                       smem.stage_base(stage), maps);
          any_stored = any_stored || stored != 0;
        }
        write_own_rows<T, C>(fresh, item, kv_head, kb, own_begin, own_end, pos_base, stage_dst,
                             resident, key_in_pass, sub, stored);
      }
      // The copy engine has read the stages before the CTA leaves (or the split merge
      // reuses them).
      flash_trace(kTraceWriteIssued, threadIdx.x == 0);
      if (kWgmmaWriteTma && threadIdx.x == 0 && any_stored) bulk_wait_read();
    }
  }
}

// The producer warpgroup over an fp8 cache (KV: Fp8E4M3 or Fp8E5M2; C::kFp8): the wgmma
// operands stay 16-bit, so every tile is converted once in shared memory, by the producer,
// rather than by the consumers, whose matrix products set the pace. The operands are fp16
// whatever the queries' dtype (the consumers bring bf16 queries into fp16's range,
// WgmmaConsumer::load_q): one conversion instruction per pair of fp8 values where bf16
// takes four (fp8x2_to), x0.96 of the time at (2,8192) d128 and x0.92 at d256 on an H100
// (bench/results/cuda.md, run 76). Per tile: each thread copies its 16-byte chunks of the
// tile's fp8 K and V rows (cp.async: whole tiles of a paged cache by groups of 16 keys in
// one block, as produce_whole_tile_by_passes; the rest key by key, keys past kv_end
// zero-filled) into staging buffer tile % kFp8Buffers, and once they have landed converts those
// same chunks (no other thread reads them, so no barrier) exactly to fp16 (fp8_convert.cuh) into
// the stage's 128-byte-swizzled slabs: one 16-byte fp8 chunk is two 16-byte chunks of fp16. It then
// makes its arrival on the stage's "full" barrier (K, then V); the copies of the next tile
// (with 2 buffers) are already under way. The cache's scales are applied by the consumers
// (k_scale to the scores, v_scale to the output). Thread mapping: kTpk threads per key row
// (D / 16 chunks of fp8, at most 8 threads), thread `sub` copying chunks sub, sub + kTpk,
// ...; 128 / kTpk keys per pass.
template <typename KV, typename C>
__device__ __forceinline__ void produce_fp8_kv_tiles(const PagedAttentionParams& p,
                                                     const CudaWorkItem& item, int kv_head,
                                                     const WgmmaSmem<C>& smem) {
  using namespace sm90;
  static_assert(kIsFp8<KV> && C::kFp8, "an fp8 cache and a configuration with staging");
  constexpr int D = C::D, BN = C::BN, STAGES = C::STAGES, kBuffers = C::kFp8Buffers;
  constexpr int kRowChunks = D / 16;  // 16-byte chunks of one fp8 row
  constexpr int kTpk = kRowChunks < 8 ? kRowChunks : 8;
  constexpr int kKeysPerPass = 128 / kTpk;
  constexpr int kPasses = BN / kKeysPerPass;
  constexpr int kThreadChunks = kRowChunks / kTpk;
  static_assert(BN % kKeysPerPass == 0 && kRowChunks % kTpk == 0, "fp8 staging passes");
  const int tid = threadIdx.x;
  const int sub = tid % kTpk, key_in_pass = tid / kTpk;
  const int kv_begin = item.kv_begin, kv_end = item.kv_end;
  const int num_tiles = (kv_end - kv_begin + BN - 1) / BN;
  const uint8_t* k_base = static_cast<const uint8_t*>(p.k_cache) +
                          static_cast<int64_t>(kv_head) * p.k_head_stride + sub * 16;
  const uint8_t* v_base = static_cast<const uint8_t*>(p.v_cache) +
                          static_cast<int64_t>(kv_head) * p.v_head_stride + sub * 16;
  const int32_t* block_row =
      p.block_table != nullptr
          ? p.block_table + static_cast<int64_t>(item.seq) * p.block_table_stride
          : nullptr;
  const int64_t contiguous_row = p.block_table != nullptr ? 0 : p.kv_start_loc[item.seq];
  const int block_size = block_row != nullptr ? p.block_size : 1 << 30;
  // Block index and slot of this thread's key of the next pass to copy (tiles are copied
  // in order, so the walk only ever steps forward: no division per key).
  int walk_block = (kv_begin + key_in_pass) / block_size;
  int walk_slot = kv_begin + key_in_pass - walk_block * block_size;
  // Whole tiles of a paged cache that PassAddressing can describe go by groups of 16 keys
  // in one block, as produce_whole_tile_by_passes (a pass of kKeysPerPass keys is
  // kGroupsPerPass groups; the thread's key is in group key_in_pass / 16 of each pass); the
  // rest by the per-key walk below, which then starts again from the tile's first key.
  constexpr int kGroups = BN / 16, kGroupsPerPass = kKeysPerPass / 16;
  static_assert(kKeysPerPass % 16 == 0, "passes of whole groups of 16 keys");
  const bool by_passes = by_passes_possible<uint8_t>(p, block_row, block_size, kv_begin);
  PassAddressing pass_addr{};
  if (by_passes) pass_addr = make_pass_addressing(p, k_base, v_base, key_in_pass % 16);
  const int group_in_pass = key_in_pass / 16;
  int pass_block = 0, pass_slot = 0, pass_next_key = -1;  // the key pass_block/slot is at
  bool walk_stale = false;
  // This thread's first staged chunk: buffer 0, K, pass 0.
  const uint32_t staging =
      smem.base + C::kFp8StagingOffset + static_cast<uint32_t>(key_in_pass * D + sub * 16);

  // Copies tile `tile`'s K and V chunks of this thread into its staging buffer (one
  // commit group).
  auto copy_tile = [&](int tile) {
    const int kb = kv_begin + tile * BN;
    const uint32_t dst_tile =
        staging + static_cast<uint32_t>(tile % kBuffers) * 2u * C::kFp8PartBytes;
    if (by_passes && kb + BN <= kv_end) {
      if (kb != pass_next_key) {
        pass_block = kb / block_size;
        pass_slot = kb - pass_block * block_size;
      }
      uint32_t row[kGroups];
      int group_slot[kGroups];
      whole_tile_groups(block_row, block_size, pass_block, pass_slot, row, group_slot);
      pass_next_key = kb + BN;
      walk_stale = true;
#pragma unroll
      for (int pass = 0; pass < kPasses; ++pass) {
        uint32_t r = row[pass * kGroupsPerPass];
        int s = group_slot[pass * kGroupsPerPass];
#pragma unroll
        for (int h = 1; h < kGroupsPerPass; ++h) {
          if (group_in_pass == h) {
            r = row[pass * kGroupsPerPass + h];
            s = group_slot[pass * kGroupsPerPass + h];
          }
        }
#pragma unroll
        for (int part = 0; part < 2; ++part) {
          const uint64_t offset = static_cast<uint64_t>(r) * (part == 0 ? pass_addr.k_block_bytes
                                                                        : pass_addr.v_block_bytes) +
                                  static_cast<uint32_t>(s) * (part == 0 ? pass_addr.k_token_bytes
                                                                        : pass_addr.v_token_bytes);
          const char* src = (part == 0 ? pass_addr.k_thread : pass_addr.v_thread) + offset;
          const uint32_t dst = dst_tile + part * C::kFp8PartBytes + pass * kKeysPerPass * D;
#pragma unroll
          for (int j = 0; j < kThreadChunks; ++j) {
            cp_async_16(dst + j * kTpk * 16, src + j * kTpk * 16, 16);
          }
        }
      }
      cp_async_commit();
      return;
    }
    if (walk_stale) {
      walk_block = (kb + key_in_pass) / block_size;
      walk_slot = kb + key_in_pass - walk_block * block_size;
      walk_stale = false;
    }
#pragma unroll
    for (int pass = 0; pass < kPasses; ++pass) {
      const int kpos = kb + pass * kKeysPerPass + key_in_pass;
      const bool valid = kpos < kv_end;
      const int64_t row = !valid                 ? 0
                          : block_row != nullptr ? block_row[walk_block]
                                                 : contiguous_row + kpos;
      const int64_t slot = block_row != nullptr ? walk_slot : 0;
      walk_slot += kKeysPerPass;
      while (walk_slot >= block_size) {
        walk_slot -= block_size;
        ++walk_block;
      }
#pragma unroll
      for (int part = 0; part < 2; ++part) {
        const int64_t token_stride = part == 0 ? p.k_token_stride : p.v_token_stride;
        const int64_t row_stride = block_row == nullptr ? token_stride
                                   : part == 0          ? p.k_block_stride
                                                        : p.v_block_stride;
        // Out-of-range keys zero-fill (src-size 0) from a valid address.
        const uint8_t* src =
            (part == 0 ? k_base : v_base) + (valid ? row * row_stride + slot * token_stride : 0);
        const uint32_t dst = dst_tile + part * C::kFp8PartBytes + pass * kKeysPerPass * D;
#pragma unroll
        for (int j = 0; j < kThreadChunks; ++j) {
          cp_async_16(dst + j * kTpk * 16, src + j * kTpk * 16, valid ? 16 : 0);
        }
      }
    }
    cp_async_commit();
  };

  for (int tile = 0; tile < kBuffers - 1 && tile < num_tiles; ++tile) copy_tile(tile);
  for (int tile = 0; tile < num_tiles; ++tile) {
    if (tile + kBuffers - 1 < num_tiles) {
      copy_tile(tile + kBuffers - 1);
      cp_async_wait<kBuffers - 1>();  // this tile's group has landed
    } else {
      cp_async_wait<0>();
    }
    const int stage = tile % STAGES;
    const uint32_t reuse_parity = ((tile / STAGES) + 1) & 1;  // the stage's previous use
    const uint32_t src_tile =
        staging + static_cast<uint32_t>(tile % kBuffers) * 2u * C::kFp8PartBytes;
    const uint32_t stage_base =
        smem.base + C::kKvOffset + static_cast<uint32_t>(stage) * 2u * C::kTileBytes;
#pragma unroll
    for (int part = 0; part < 2; ++part) {
      // All of the part's staged chunks are loaded first, before the wait for the stage:
      // their latencies overlap each other and the wait instead of each delaying its own
      // conversion (x0.94 at (2,8192) d128 and x0.83 at d256 on an H100, run 78).
      uint4 raws[kPasses][kThreadChunks];
#pragma unroll
      for (int pass = 0; pass < kPasses; ++pass) {
#pragma unroll
        for (int j = 0; j < kThreadChunks; ++j) {
          uint4& raw = raws[pass][j];
          asm volatile(
              "ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
              : "=r"(raw.x), "=r"(raw.y), "=r"(raw.z), "=r"(raw.w)
              : "r"(src_tile + part * C::kFp8PartBytes + pass * kKeysPerPass * D + j * kTpk * 16));
        }
      }
      if (tile >= STAGES) {
        mbarrier_wait((part == 0 ? smem.empty_k : smem.empty_v) + 8u * stage, reuse_parity);
      }
#pragma unroll
      for (int pass = 0; pass < kPasses; ++pass) {
        const int r = pass * kKeysPerPass + key_in_pass;  // key row in the tile
#pragma unroll
        for (int j = 0; j < kThreadChunks; ++j) {
          const int c = sub + j * kTpk;  // fp8 chunk: elements [16 c, 16 c + 16)
          const uint4 raw = raws[pass][j];
          const uint4 lo = fp8x8_to<__half, KV>(make_uint2(raw.x, raw.y));
          const uint4 hi = fp8x8_to<__half, KV>(make_uint2(raw.z, raw.w));
          // Chunks 2 (c % 4) and + 1 of slab c / 4; the threads whose c / 4 is odd store
          // their second chunk first, so that each store's 8-thread phases hit 8 distinct
          // 16-byte bank groups.
          const uint32_t row_base = stage_base + part * C::kTileBytes +
                                    static_cast<uint32_t>(c / 4) * C::kSlabBytes + r * 128u;
          const int q0 = 2 * (c % 4);
          const bool odd = ((c / 4) & 1) != 0;
          const uint32_t a0 =
              row_base + static_cast<uint32_t>(((q0 + (odd ? 1 : 0)) ^ (r & 7)) << 4);
          const uint32_t a1 =
              row_base + static_cast<uint32_t>(((q0 + (odd ? 0 : 1)) ^ (r & 7)) << 4);
          const uint4 first = odd ? hi : lo, second = odd ? lo : hi;
          asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(a0), "r"(first.x),
                       "r"(first.y), "r"(first.z), "r"(first.w)
                       : "memory");
          asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(a1), "r"(second.x),
                       "r"(second.y), "r"(second.z), "r"(second.w)
                       : "memory");
        }
      }
      // The stores (generic proxy) become visible to the consumers' wgmma (async proxy).
      fence_proxy_async();
      mbarrier_arrive((part == 0 ? smem.full_k : smem.full_v) + 8u * stage);
    }
  }
}

}  // namespace attnkit::cuda
