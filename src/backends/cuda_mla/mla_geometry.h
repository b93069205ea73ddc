#pragma once
// Tile geometry of CUDA_MLA's kernels, in plain C++ so that the host planner (and its
// CPU-only tests) and the kernels read the same numbers.
//
// The latent cache holds one 576-wide row per token: 512 latent values (also the values V)
// and 64 rope values. Every query head of a request attends over the same rows, so the
// kernel packs "rows" = (query token, head) pairs of one request into the tensor-core M
// dimension: row r of a request is token r / num_heads, head r % num_heads.
//
// One CTA (kThreads = 8 warps) runs one work item: kRows packed rows against a key range,
// in tiles of kKvTile keys streamed through shared memory. Per tile:
//   S phase:  S = Q K^T over the 576 dims. A warp owns kSWarpMTiles m16 tiles, a 16- or
//             32-key slice and 576 / kKSplit dims; the kKSplit partial sums meet in shared
//             memory, in kKSplit buffers, or (kSInPlace, two splits) in one buffer that the
//             second split adds to after a barrier. A warp tile of R rows x K keys reads
//             (R + K) x its dims from shared memory for R x K x dims multiply-adds, so the
//             wider the warp tile the less shared-memory traffic per mma.
//   softmax:  kThreadsPerRow threads per row fold the partials, mask, update the running
//             max/sum and write P (compute dtype) and the rescale factor of every row.
//   PV phase: O += P V over the first 512 dims of the same tile. Warp w owns output dims
//             [64 w, 64 w + 64) of every row, so kMTiles * 8 n8 tiles of fp32 accumulators
//             (128 floats per thread for 64 rows) stay in registers.
//
// Shared memory (bytes, in this order):
//   Q      [kRows][576]         compute dtype, 16-byte chunks XOR-swizzled by row % 8
//   stage  [kStages][kKvTile][576] latent tiles, same swizzle (an fp8 cache is loaded into
//          registers kFp8Depth tiles ahead and converted to the compute dtype on the store)
//   S      [kSBuffers][kRows][kKvTile + 8] fp32 partial scores (+8: conflict-free float2
//          stores)
//   P      [kRows][kKvTile + 8] compute dtype probabilities (+8: conflict-free ldmatrix)
//   rows   alpha, m, l: fp32 [kRows] each

#include <cstddef>

#include "attnkit/kernels/mla_geometry.h"

namespace attnkit::cuda_mla {

inline constexpr int kWarps = 8;
inline constexpr int kThreads = 32 * kWarps;
inline constexpr int kKvTile = 32;  // keys per shared-memory tile
// The largest dynamic shared memory a CTA may opt into on sm_80 (A100: 163 KiB) and on
// sm_90 (227 KiB). Configurations marked SM90_ONLY need the larger one; the launcher picks
// them only when the device allows it (cudaDevAttrMaxSharedMemoryPerBlockOptin).
inline constexpr size_t kSm80MaxSmemBytes = 166912;
inline constexpr size_t kSm90MaxSmemBytes = 232448;

template <int M_TILES, int STAGES, int K_SPLIT, int MIN_BLOCKS, int S_WARP_M_TILES, bool S_IN_PLACE,
          bool SM90_ONLY = false, bool OVERLAP = false>
struct MlaConfig {
  static constexpr int kMTiles = M_TILES;
  static constexpr int kRows = 16 * M_TILES;
  static constexpr int kStages = STAGES;
  static constexpr int kKSplit = K_SPLIT;
  static constexpr int kMinBlocks = MIN_BLOCKS;  // CTAs per SM the launch bounds ask for
  static constexpr int kSWarpMTiles = S_WARP_M_TILES;
  static constexpr bool kSInPlace = S_IN_PLACE;
  static constexpr bool kSm90Only = SM90_ONLY;
  // Software-pipelined tile loop (three stages): the PV phase of tile t and the S phase of
  // tile t + 1 run between the same two barriers (mla_kernel.cuh).
  static constexpr bool kOverlap = OVERLAP;
  static constexpr int kSBuffers = S_IN_PLACE ? 1 : K_SPLIT;
  static constexpr int kMGroups = M_TILES / S_WARP_M_TILES;  // S-phase row groups
  static constexpr int kKeySlices = kWarps / (kMGroups * K_SPLIT);
  static constexpr int kSliceKeys = kKeySlices > 0 ? kKvTile / kKeySlices : 0;
  static constexpr int kSNTiles = kSliceKeys / 8;               // n8 tiles of an S-phase warp
  static constexpr int kKSteps = kMlaLatentDim / 16 / K_SPLIT;  // k16 steps per S-phase warp
  static constexpr int kThreadsPerRow = kThreads / kRows;
  static constexpr int kKeysPerThread = kKvTile / kThreadsPerRow;
  static constexpr int kThreadsPerKey = kThreads / kKvTile;  // tile loader
  static constexpr int kChunksPerThread = kMlaLatentDim / 8 / kThreadsPerKey;
  static constexpr int kSStride = kKvTile + 8;
  static constexpr int kPStride = kKvTile + 8;
  // fp8 cache: tiles in flight in registers (8 bytes = one converted 16-byte chunk per
  // load, kFp8Loads loads per thread and tile). Two keep the bandwidth-bound small-row
  // CTAs busy; one is enough for the compute-bound large-row CTAs, whose 128 O
  // accumulators leave no room for a second set.
  static constexpr int kFp8Depth = M_TILES == 1 ? 2 : 1;
  static constexpr int kFp8Loads = kMlaLatentDim / 8 / kThreadsPerKey;

  static constexpr size_t kQBytes = size_t{2} * kRows * kMlaLatentDim;
  static constexpr size_t kStageBytes = size_t{2} * kKvTile * kMlaLatentDim;
  static constexpr size_t kSBytes = size_t{4} * kSBuffers * kRows * kSStride;
  static constexpr size_t kPBytes = size_t{2} * kRows * kPStride;
  static constexpr size_t kRowStateBytes = size_t{4} * 3 * kRows;
  static constexpr size_t kSmemBytes =
      kQBytes + STAGES * kStageBytes + kSBytes + kPBytes + kRowStateBytes;
  // CTAs of this configuration one sm_90 SM holds (228 KiB of shared memory, 1 KiB of it
  // reserved per CTA): what the planner sizes its waves by.
  static constexpr int kCtasPerSm90 = static_cast<int>(size_t{228} * 1024 / (kSmemBytes + 1024));

  static_assert(M_TILES % S_WARP_M_TILES == 0, "S-phase warps own whole m16 tiles");
  static_assert(kWarps % (kMGroups * K_SPLIT) == 0, "warps must tile (row groups x k splits)");
  static_assert(!S_IN_PLACE || K_SPLIT == 2, "in-place partials: one store, then one add");
  static_assert(kSliceKeys == 16 || kSliceKeys == 32,
                "an S-phase warp owns one or two 16-key slices (one ldmatrix.x4 each)");
  static_assert(kFp8Loads * kThreadsPerKey * 8 == kMlaLatentDim, "fp8 loads split evenly");
  static_assert(!OVERLAP || (STAGES == 3 && kFp8Depth == 1),
                "the pipelined loop keeps tiles t and t + 1 resident while t + 2 loads");
  static_assert((kMlaLatentDim / 16) % K_SPLIT == 0, "the k splits must be whole k16 steps");
  static_assert(kThreadsPerRow >= 1 && kThreadsPerRow <= 32 && kKeysPerThread % 2 == 0,
                "softmax rows are handled by 1..32 lanes of one warp, two keys at a time");
  static_assert(kMlaValueDim == 64 * kWarps, "each warp owns 64 output dims");
  static_assert((kMlaLatentDim / 8) % kThreadsPerKey == 0, "loader chunks split evenly");
  static_assert(STAGES >= 2, "double buffering at least");
  static_assert(kCtasPerSm90 >= MIN_BLOCKS, "the launch bounds ask for what fits");
  static_assert(kSmemBytes <= (SM90_ONLY ? kSm90MaxSmemBytes : kSm80MaxSmemBytes),
                "must fit the shared memory of the architectures it runs on");
};

// Decode of up to 16 rows (e.g. 16 heads x 1 token, 8 heads x 2 tokens): one m16 tile;
// the 8 S-phase warps split the keys in 2 and the 576 dims in 4. About 100 KiB of shared
// memory: two CTAs per SM on sm_90.
using MlaSmallConfig = MlaConfig<1, 2, 4, 2, 1, false>;
// Everything else (many heads, prefill): 64 rows, four m16 tiles. S phase: 2 row groups of
// 32 rows x 2 key slices x 2 dim halves (partials added in place: a second S buffer would
// not fit sm_80); PV phase: every V fragment read from shared memory feeds all four m16
// tiles. About 160 KiB: one CTA per SM.
using MlaLargeConfig = MlaConfig<4, 2, 2, 1, 2, true>;
// sm_90's large-row configuration: the same 64 rows, but each S-phase warp owns 32 rows x
// all 32 keys x a quarter of the dims (2 row groups x 4 dim quarters), so it reads 18 KiB
// of fragments per tile instead of 27 KiB and runs eight mma chains; four partial score
// buffers (40 KiB) remove the in-place add and its barrier; a third stage lets the tile
// loop overlap PV(t) with S(t + 1) (two barriers per tile instead of four). 226 KiB: only
// sm_90's shared memory holds it, one CTA per SM like MlaLargeConfig.
using MlaLargeSm90Config = MlaConfig<4, 3, 4, 1, 2, false, true, true>;
static_assert(MlaLargeSm90Config::kRows == MlaLargeConfig::kRows &&
                  MlaLargeSm90Config::kCtasPerSm90 == MlaLargeConfig::kCtasPerSm90,
              "the planner sizes large-row work the same for both configurations");

}  // namespace attnkit::cuda_mla
