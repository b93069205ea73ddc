#pragma once
// The Hopper prefill kernel's (flash_wgmma_kernel.cuh) compile-time configuration, its
// timing-ablation switch and its shared-memory window with the stage barriers.

#include "kernels/cuda/mma_primitives.cuh"
#include "kernels/cuda/wgmma_primitives.cuh"

namespace attnkit::cuda {

// Timing ablations (bench/variants/abl*.h; results are wrong, for measuring only): bit 0
// drops the output write, bit 1 fills Q in shared memory from registers instead of loading
// it, bit 2 has the producer issue no cp.async K/V copies (the block lookups and address
// arithmetic that only feed them go too; it still waits and arrives on the barriers, and
// the stages keep whatever an earlier CTA left there), bit 3 has the consumers skip the
// softmax (P is the raw S, O is never rescaled).
#ifndef ATTNKIT_FLASH_WGMMA_ABLATE
#define ATTNKIT_FLASH_WGMMA_ABLATE 0
#endif
inline constexpr int kWgmmaAblate = ATTNKIT_FLASH_WGMMA_ABLATE;

// ATTNKIT_FLASH_WGMMA_OUT_TMA 1 (the default): the consumers store whole 64-row output tiles
// with the copy engine (WgmmaKvMaps::o, flash_wgmma.cu's add_row_maps); 0: as 16-byte rows
// (bench/variants/nootma.h).
#ifndef ATTNKIT_FLASH_WGMMA_OUT_TMA
#define ATTNKIT_FLASH_WGMMA_OUT_TMA 1
#endif
inline constexpr bool kWgmmaOutTma = ATTNKIT_FLASH_WGMMA_OUT_TMA != 0;

// ATTNKIT_FLASH_WGMMA_WRITE_TMA 1 (the default): the folded cache write (produce_kv_tiles)
// stores the own keys of tiles the copy engine brought from the inputs with the copy engine
// too, 16 keys a box where their slots are consecutive in one block (WgmmaKvMaps::write_k /
// write_v); 0: every own key by 16-byte stores from the producer threads
// (bench/variants/nowtma.h).
#ifndef ATTNKIT_FLASH_WGMMA_WRITE_TMA
#define ATTNKIT_FLASH_WGMMA_WRITE_TMA 1
#endif
inline constexpr bool kWgmmaWriteTma = ATTNKIT_FLASH_WGMMA_WRITE_TMA != 0;

template <int D_, int BN_, int STAGES_, bool PING_PONG_, bool COPY_ENGINE_ = false,
          int MIN_COPY_BOX_ROWS_ = 8, int FP8_BUFFERS_ = 0>
struct WgmmaFlashConfig {
  static constexpr int D = D_;
  static constexpr int BN = BN_;
  static constexpr int STAGES = STAGES_;
  // The two consumers take turns issuing their matrix products (FlashAttention-3's
  // warp-scheduler barriers): one's products run while the other computes its softmax.
  static constexpr bool kPingPong = PING_PONG_;
  // Whole K/V tiles of paged caches by the copy engine (WgmmaKvMaps), the rest by
  // cp.async; false: every tile by cp.async.
  static constexpr bool kCopyEngine = COPY_ENGINE_;
  // The fewest keys per copy-engine box (the block size, or BN when blocks are larger):
  // tiles of caches with smaller blocks go by cp.async.
  static constexpr int kMinCopyBoxRows = MIN_COPY_BOX_ROWS_;
  // fp8 caches (FP8_BUFFERS_ > 0): the producer copies each tile's fp8 K and V rows into
  // one of kFp8Buffers staging buffers and converts them into the stage
  // (produce_fp8_kv_tiles); with 2, the next tile's copies run during the conversion.
  static constexpr int kFp8Buffers = FP8_BUFFERS_;
  static constexpr bool kFp8 = FP8_BUFFERS_ > 0;
  static constexpr int kConsumers = 2;  // consumer warpgroups of 64 rows
  static constexpr int kRows = 64 * kConsumers;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr int kChunks = D / 8;  // 16-byte chunks per row
  static constexpr int kSlabs = D / 64;  // 128-byte swizzle slabs per row
  static constexpr uint32_t kQSlabBytes = 64u * 128u;
  static constexpr uint32_t kQBytes = kSlabs * kQSlabBytes;  // one consumer's Q
  static constexpr uint32_t kSlabBytes = BN * 128u;          // one slab of K or V
  static constexpr uint32_t kTileBytes = kSlabs * kSlabBytes;
  static constexpr uint32_t kKvOffset = kConsumers * kQBytes;
  static constexpr uint32_t kFp8StagingOffset = kKvOffset + STAGES * 2u * kTileBytes;
  static constexpr uint32_t kFp8PartBytes = BN * D;  // one fp8 tile of K or V, unswizzled
  static constexpr uint32_t kBarrierOffset = kFp8StagingOffset + kFp8Buffers * 2u * kFp8PartBytes;
  // + 1024: the dynamic window is aligned up to 1024 bytes inside the kernel.
  // fp8 caches: the consumers' query rows' 2^-shift (WgmmaConsumer::load_q), after the
  // barriers.
  // Each consumer's Q landed (Q by the copy engine, WgmmaConsumer::load_q), after the
  // stage barriers.
  static constexpr uint32_t kQBarrierOffset = kBarrierOffset + 32u * STAGES;
  static constexpr uint32_t kQUnscaleOffset = kQBarrierOffset + 8u * kConsumers;
  static constexpr size_t kSmemBytes = 1024u + kQUnscaleOffset + (kFp8 ? 4u * kRows : 0u);
  // Shared memory the split merge may use from the aligned base (below the barriers).
  static constexpr size_t kMergeSmemBytes = kBarrierOffset;
  // Registers per thread after setmaxnreg: 128 * (producer + 2 * consumer) <= 64 Ki.
  static constexpr int kProducerRegs = 72;
  static constexpr int kConsumerRegs = 216;
  // The split-KV merge runs on the consumer threads only (the producer has left).
  static constexpr int kMergeThreads = 128 * kConsumers;
  static constexpr int kMergeThreadBase = 128;
  __device__ static void merge_sync() { asm volatile("bar.sync 1, %0;\n" ::"n"(kMergeThreads)); }
  static_assert(D % 64 == 0 && BN % 16 == 0 && BN <= 256 && STAGES >= 2, "tile shape");
  static_assert(!(kFp8 && kCopyEngine), "fp8 tiles are staged by cp.async");
  static_assert(128 * (kProducerRegs + kConsumers * kConsumerRegs) <= 65536, "register file");
};

// The steps of flash_wgmma_kernel, in the order it runs them. Each is inlined into the
// kernel: every size is a compile-time constant of C and the register arrays (S, O, P) are
// members of the consumer's state, which lives in registers.

// The dynamic shared-memory window, aligned up to 1024 bytes, and its mbarriers: per stage
// s (at + 8 s) K landed and V landed (producer arrivals), K free and V free (consumer
// warps' arrivals).
template <typename C>
struct WgmmaSmem {
  unsigned char* data;  // the aligned window
  uint32_t base;        // its shared-memory address
  uint32_t full_k, full_v, empty_k, empty_v;
  uint32_t q_full;  // consumer c's at q_full + 8 c

  __device__ __forceinline__ explicit WgmmaSmem(unsigned char* raw_window) {
    const uint32_t raw = smem_address(raw_window);
    base = (raw + 1023u) & ~1023u;
    data = raw_window + (base - raw);
    full_k = base + C::kBarrierOffset;
    full_v = full_k + 8u * C::STAGES;
    empty_k = full_v + 8u * C::STAGES;
    empty_v = empty_k + 8u * C::STAGES;
    q_full = base + C::kQBarrierOffset;
  }

  // Stage s's first byte, and its "full" / "empty" barrier of K (part 0) or V (part 1).
  __device__ __forceinline__ uint32_t stage_base(int s) const {
    return base + C::kKvOffset + static_cast<uint32_t>(s) * 2u * C::kTileBytes;
  }
  __device__ __forceinline__ uint32_t full(int part, int s) const {
    return (part == 0 ? full_k : full_v) + 8u * static_cast<uint32_t>(s);
  }
  __device__ __forceinline__ uint32_t empty(int part, int s) const {
    return (part == 0 ? empty_k : empty_v) + 8u * static_cast<uint32_t>(s);
  }

  __device__ __forceinline__ void init_barriers() const {
#pragma unroll
    for (int s = 0; s < C::STAGES; ++s) {
      sm90::mbarrier_init(full_k + 8u * s, 128);  // producer threads
      sm90::mbarrier_init(full_v + 8u * s, 128);
      sm90::mbarrier_init(empty_k + 8u * s, 4 * C::kConsumers);  // consumer warps
      sm90::mbarrier_init(empty_v + 8u * s, 4 * C::kConsumers);
    }
#pragma unroll
    for (int c = 0; c < C::kConsumers; ++c) sm90::mbarrier_init(q_full + 8u * c, 1);
  }
};

}  // namespace attnkit::cuda
