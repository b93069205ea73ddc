// GPU conformance of CUDA_FLASH and CUDA_PAGED against an fp64 dense oracle (gpu_harness.h):
// every declared capability (head sizes, dtypes, KV dtypes, GQA/MQA, causal prefill,
// chunked prefill, decode with split-KV, mixed batches, sliding window, chunked local,
// sinks, soft-cap, encoder, encoder-only, cross attention, NHD/HND, block sizes). Fresh
// random inputs every run. Skipped with a message when no GPU is present.
//
// Tolerances (relative L2 of the whole output): bf16 2e-2, fp16 5e-3. The kernels round P
// to the compute dtype before P*V (flash) and the output itself is rounded, so these are
// a few units of the dtype's epsilon (bf16 7.8e-3, fp16 9.8e-4).

#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "attnkit/core/error.h"
#include "gpu_harness.h"

namespace attnkit::testing {
namespace {

double tolerance(DType dtype) { return dtype == DType::kBFloat16 ? 2e-2 : 5e-3; }

struct NamedCase {
  std::string name;
  GpuCase c;
};
// Readable test listings (ctest -N) instead of a byte dump.
void PrintTo(const NamedCase& c, std::ostream* os) { *os << c.c.describe(); }

std::vector<NamedCase> all_cases() {
  std::vector<NamedCase> out;
  auto add = [&](std::string name, GpuCase c) { out.push_back({std::move(name), std::move(c)}); };
  for (const char* backend : {"CUDA_FLASH", "CUDA_PAGED"}) {
    const std::string b = backend == std::string("CUDA_FLASH") ? "Flash" : "Paged";
    const std::vector<int> heads =
        b == "Flash" ? std::vector<int>{64, 128, 256} : std::vector<int>{16, 80, 128, 256};
    for (int d : heads) {
      for (DType dt : {DType::kBFloat16, DType::kFloat16}) {
        const std::string ds = dt == DType::kBFloat16 ? "Bf16" : "Fp16";
        GpuCase decode;
        decode.backend = backend;
        decode.dtype = dt;
        decode.head_size = d;
        decode.num_heads = 32;
        decode.num_kv_heads = 8;
        decode.requests = {{1, 3000}, {1, 777}, {1, 1}, {1, 64}};
        add(b + "DecodeSplitKvD" + std::to_string(d) + ds, decode);
        GpuCase prefill;
        prefill.backend = backend;
        prefill.dtype = dt;
        prefill.head_size = d;
        prefill.num_heads = 8;
        prefill.num_kv_heads = 2;
        prefill.requests = {{300, 300}, {129, 129}, {200, 1000}, {1, 1}};
        add(b + "PrefillCausalD" + std::to_string(d) + ds, prefill);
      }
    }
    GpuCase mixed;
    mixed.backend = backend;
    mixed.dtype = DType::kFloat16;
    mixed.num_heads = 16;
    mixed.num_kv_heads = 4;
    mixed.requests = {{1, 2000}, {64, 500}, {3, 900}, {1, 1}, {17, 17}};
    add(b + "MixedBatch", mixed);
    GpuCase window = mixed;
    window.dtype = DType::kBFloat16;
    window.sliding_window = 100;
    window.requests = {{1, 2000}, {250, 400}, {4, 130}};
    add(b + "SlidingWindow", window);
    GpuCase chunk = window;
    chunk.sliding_window = 0;
    chunk.chunk_size = 64;
    add(b + "ChunkedLocal", chunk);
    GpuCase sinks;
    sinks.backend = backend;
    sinks.num_heads = 64;
    sinks.num_kv_heads = 8;
    sinks.head_size = 64;
    sinks.sinks = true;
    sinks.requests = {{1, 4000}, {1, 5}, {80, 80}, {1, 0 + 1}};
    add(b + "Sinks", sinks);
    GpuCase sinks_window = sinks;
    sinks_window.sliding_window = 128;
    add(b + "SinksWithSlidingWindow", sinks_window);
    GpuCase cap;
    cap.backend = backend;
    cap.head_size = 256;
    cap.num_heads = 8;
    cap.num_kv_heads = 4;
    cap.soft_cap = 2.0f;
    cap.q_range = 4.0f;
    cap.requests = {{1, 1500}, {90, 90}};
    add(b + "SoftCap", cap);
    GpuCase encoder;
    encoder.backend = backend;
    encoder.attn_type = AttentionType::kEncoder;
    encoder.num_heads = 12;
    encoder.num_kv_heads = 12;
    encoder.head_size = 64;
    encoder.requests = {{100, 100}, {37, 37}, {1, 1}};
    add(b + "EncoderBidirectional", encoder);
    GpuCase encoder_only = encoder;
    encoder_only.attn_type = AttentionType::kEncoderOnly;
    add(b + "EncoderOnlyContiguous", encoder_only);
    GpuCase cross;
    cross.backend = backend;
    cross.attn_type = AttentionType::kEncoderDecoder;
    cross.num_heads = 6;
    cross.num_kv_heads = 6;
    cross.head_size = 64;
    cross.requests = {{5, 300}, {1, 1500}, {40, 7}};
    add(b + "CrossAttention", cross);
    GpuCase hnd = mixed;
    hnd.layout = KvLayout::kHND;
    hnd.block_size = 32;
    add(b + "HndLayoutBlock32", hnd);
    GpuCase odd_block = mixed;
    odd_block.block_size = 5;
    odd_block.dtype = DType::kBFloat16;
    add(b + "OddBlockSize5", odd_block);
    GpuCase mqa = mixed;
    mqa.num_heads = 8;
    mqa.num_kv_heads = 1;
    mqa.requests = {{1, 2500}, {33, 60}, {2, 2}};
    add(b + "MultiQuery", mqa);
    // 16 GQA rows per KV head and one long request: many splits whose partial rows do
    // not all fit in shared memory, so the in-kernel merge reads them from L2 (the
    // 32/8-head decode cases above take the staged path).
    GpuCase wide_rows;
    wide_rows.backend = backend;
    wide_rows.dtype = DType::kBFloat16;
    wide_rows.num_heads = 16;
    wide_rows.num_kv_heads = 1;
    wide_rows.requests = {{1, 12000}, {2, 5000}, {1, 40}};
    add(b + "DecodeSplitKvSixteenRows", wide_rows);
    GpuCase explicit_kv = mixed;
    explicit_kv.kv_dtype = KvCacheDType::kFloat16;
    add(b + "ExplicitKvDtypeEqualToCompute", explicit_kv);
  }
  // CUDA_FLASH prefill over many 128-row tiles and 32-key tiles with GQA rows packed on M:
  // every pipeline stage is reused, diagonal and interior tiles both occur, and the last
  // row tile of each request is partial.
  GpuCase long_prefill;
  long_prefill.backend = "CUDA_FLASH";
  long_prefill.dtype = DType::kBFloat16;
  long_prefill.head_size = 128;
  long_prefill.num_heads = 16;
  long_prefill.num_kv_heads = 4;
  long_prefill.requests = {{400, 400}, {260, 900}};
  add("FlashPrefillGqaManyTilesD128", long_prefill);
  // Enough row tiles (41 x 8 KV heads) that the planner splits nothing: whole-range CTAs
  // and the unsplit epilogue, with long key loops through every pipeline stage.
  GpuCase unsplit = long_prefill;
  unsplit.num_heads = 32;
  unsplit.num_kv_heads = 8;
  unsplit.requests = {{700, 700}, {600, 650}};
  add("FlashPrefillGqaUnsplitD128", unsplit);
  // Three query heads per KV head: a 128-row tile ends inside a token's rows, so one
  // token's query heads are split between two row tiles; a prefill, a chunk after cached
  // context and a decode in one step.
  GpuCase group3 = long_prefill;
  group3.dtype = DType::kFloat16;
  group3.head_size = 64;
  group3.num_heads = 12;
  group3.num_kv_heads = 4;
  group3.requests = {{300, 300}, {200, 700}, {1, 40}};
  add("FlashPrefillGqaGroup3RowsAcrossTiles", group3);
  // Head size 256 (64-key tiles, two stages on Hopper) with chunks after cached context
  // whose first positions are not multiples of the tile: a 128-token row tile's own keys
  // then span three tiles, more than the stages hold, so the folded cache write reads the
  // oldest of them again from the inputs; one short chunk after a long context is split
  // over the key range (its own keys in the last split only), beside a decode.
  GpuCase d256_chunks = long_prefill;
  d256_chunks.head_size = 256;
  d256_chunks.num_heads = 4;
  d256_chunks.num_kv_heads = 2;
  d256_chunks.requests = {{300, 377}, {130, 6130}, {1, 50}};
  add("FlashPrefillAfterContextD256", d256_chunks);
  // At head size 64 the Hopper prefill kernel loads whole K/V tiles of a paged cache with
  // blocks of 64 keys or more with the copy engine (one load per block, or per tile when
  // blocks are larger) and the last, partial tile of each item with cp.async, which
  // zero-fills the keys past its end (the slots there are poisoned): block sizes equal to,
  // below and above the 128-key tile, both layouts. Whole tiles of smaller blocks of a
  // multiple of 16 keys (16, 48 and, at head sizes 128 and 256, every block size) go by
  // cp.async in passes of 16 keys (one block-table entry per pass), blocks of 8 key by key.
  // fp8 caches (the Fp8 cases): the producer stages each tile's fp8 rows and converts
  // them into fp16 slabs (one staging buffer at head size 256, two below); whole tiles of
  // blocks of a multiple of 16 keys are copied by groups of 16 keys in one block (at head
  // size 64 a pass of 32 keys spans two groups: blocks of 16 and 48), blocks of 8 key by
  // key; keys past each item's end zero-filled; scales away from 1, so that a missing k_scale or
  // v_scale shows. The folded cache write stores 16 keys at a time with the copy engine where
  // their slots are consecutive in one block: blocks of 24 and 40 keys put some passes of 16
  // keys across two blocks (stored key by key) beside passes inside one. Other GPUs run all
  // of them on the sm_80 kernels.
  struct PrefillTileCase {
    const char* name;
    int head_size;
    int block_size;
    KvLayout layout;
    DType dtype;
    KvCacheDType kv;
  };
  constexpr KvCacheDType kSame = KvCacheDType::kAuto;
  for (const PrefillTileCase& t :
       {PrefillTileCase{"CopyEngineBlock8NhdD64", 64, 8, KvLayout::kNHD, DType::kBFloat16, kSame},
        PrefillTileCase{"CopyEngineBlock64HndD64", 64, 64, KvLayout::kHND, DType::kFloat16, kSame},
        PrefillTileCase{"CopyEngineBlock128NhdD64", 64, 128, KvLayout::kNHD, DType::kFloat16,
                        kSame},
        PrefillTileCase{"CopyEngineBlock256HndD64", 64, 256, KvLayout::kHND, DType::kBFloat16,
                        kSame},
        PrefillTileCase{"CopyEngineBlock48NhdD64", 64, 48, KvLayout::kNHD, DType::kBFloat16, kSame},
        PrefillTileCase{"CopyEngineBlock8NhdD128", 128, 8, KvLayout::kNHD, DType::kBFloat16, kSame},
        PrefillTileCase{"CopyEngineBlock64NhdD128", 128, 64, KvLayout::kNHD, DType::kFloat16,
                        kSame},
        PrefillTileCase{"CopyEngineBlock256HndD128", 128, 256, KvLayout::kHND, DType::kBFloat16,
                        kSame},
        PrefillTileCase{"CopyEngineBlock32HndD256", 256, 32, KvLayout::kHND, DType::kBFloat16,
                        kSame},
        PrefillTileCase{"CopyEngineBlock48NhdD256", 256, 48, KvLayout::kNHD, DType::kFloat16,
                        kSame},
        PrefillTileCase{"WriteBlock24NhdD128", 128, 24, KvLayout::kNHD, DType::kBFloat16, kSame},
        PrefillTileCase{"WriteBlock40HndD256", 256, 40, KvLayout::kHND, DType::kFloat16, kSame},
        PrefillTileCase{"Fp8E5M2Block48NhdD64", 64, 48, KvLayout::kNHD, DType::kBFloat16,
                        KvCacheDType::kFp8E5M2},
        PrefillTileCase{"Fp8E4M3Block16HndD64", 64, 16, KvLayout::kHND, DType::kFloat16,
                        KvCacheDType::kFp8E4M3},
        PrefillTileCase{"Fp8E4M3Block8NhdD128", 128, 8, KvLayout::kNHD, DType::kBFloat16,
                        KvCacheDType::kFp8E4M3},
        PrefillTileCase{"Fp8E5M2Block256HndD128", 128, 256, KvLayout::kHND, DType::kFloat16,
                        KvCacheDType::kFp8E5M2},
        PrefillTileCase{"Fp8E4M3Block32HndD256", 256, 32, KvLayout::kHND, DType::kFloat16,
                        KvCacheDType::kFp8E4M3}}) {
    GpuCase c = long_prefill;
    c.head_size = t.head_size;
    c.block_size = t.block_size;
    c.layout = t.layout;
    c.dtype = t.dtype;
    c.kv_dtype = t.kv;
    if (t.kv != kSame) {
      c.k_scale = 0.04f;
      c.v_scale = 0.02f;
    }
    c.requests = {{700, 700}, {300, 1000}, {1, 33}};
    add(std::string("FlashPrefill") + t.name, c);
  }
  // fp8 caches with scales (CUDA_FLASH converts each landed tile to the compute dtype,
  // CUDA_PAGED each element it reads) and, CUDA_PAGED only, a 16-bit cache of the other
  // dtype.
  for (const std::string backend : {"CUDA_PAGED", "CUDA_FLASH"}) {
    const bool paged = backend == "CUDA_PAGED";
    for (KvCacheDType kv :
         {KvCacheDType::kFp8E4M3, KvCacheDType::kFp8E5M2, KvCacheDType::kFloat16}) {
      if (!paged && kv == KvCacheDType::kFloat16) continue;
      GpuCase c;
      c.backend = backend;
      c.dtype = DType::kBFloat16;
      c.kv_dtype = kv;
      c.num_heads = 16;
      c.num_kv_heads = 4;
      c.head_size = 128;
      if (kv != KvCacheDType::kFloat16) {
        c.k_scale = 0.02f;
        c.v_scale = 0.01f;
      }
      c.requests = {{1, 2000}, {70, 300}, {1, 5}};
      const std::string kv_name = kv == KvCacheDType::kFp8E4M3   ? "Fp8E4M3"
                                  : kv == KvCacheDType::kFp8E5M2 ? "Fp8E5M2"
                                                                 : "Fp16UnderBf16";
      const std::string prefix = paged ? "Paged" : "Flash";
      add(prefix + "Kv" + kv_name, c);
      GpuCase hnd = c;
      hnd.layout = KvLayout::kHND;
      hnd.head_size = paged ? 48 : 64;  // CUDA_FLASH: 64, 128, 256
      hnd.sinks = true;
      hnd.sliding_window = 200;
      add(prefix + "Kv" + kv_name + (paged ? "HndD48WindowSinks" : "HndD64WindowSinks"), hnd);
    }
  }
  // CUDA_PAGED's staged tiles at the edges of its layouts: 16-byte fp8 rows (one copy
  // slot per key, 32 keys per tile), fp8 at head size 256 (16 keys per tile, swizzled K
  // rows), and 16-bit rows of 64 bytes (32 keys per tile, the K rows padded for the banks).
  for (const int d : {16, 32, 256}) {
    GpuCase c;
    c.backend = "CUDA_PAGED";
    c.dtype = DType::kBFloat16;
    c.kv_dtype = KvCacheDType::kFp8E4M3;
    c.num_heads = 16;
    c.num_kv_heads = 4;
    c.head_size = d;
    c.k_scale = 0.03f;
    c.v_scale = 0.02f;
    c.requests = {{1, 2000}, {70, 300}, {1, 5}, {3, 17}};
    add("PagedKvFp8E4M3D" + std::to_string(d), c);
  }
  GpuCase paged_d32;
  paged_d32.backend = "CUDA_PAGED";
  paged_d32.dtype = DType::kBFloat16;
  paged_d32.num_heads = 16;
  paged_d32.num_kv_heads = 4;
  paged_d32.head_size = 32;
  paged_d32.block_size = 5;
  paged_d32.requests = {{1, 2000}, {70, 300}, {1, 5}, {3, 17}};
  add("PagedD32OddBlockBf16", paged_d32);
  // CUDA_PAGED's three tile shapes (32 keys of rows up to 128 bytes, 16 up to 256, 8 up to
  // 512: G = 1, 2, 4 row groups of scoring lanes), each with K rows of an odd number of
  // 16-byte slots (staged as they are), of an even one (padded by a slot) and of a multiple
  // of 8 (XOR-swizzled): decodes whose key counts end on either side of a warp tile (`edge`
  // requests), odd blocks, HND, and a long request cut into many splits whose edges fall
  // inside blocks; `group` query heads per KV head.
  struct TileShape {
    const char* name;
    int head_size;
    KvCacheDType kv;
  };
  const auto add_tile_cases = [&](const std::string& prefix, const TileShape& t, int group,
                                  std::vector<std::pair<int, int>> edge) {
    GpuCase edges;
    edges.backend = "CUDA_PAGED";
    edges.dtype = DType::kBFloat16;
    edges.kv_dtype = t.kv;
    if (t.kv != KvCacheDType::kAuto) {
      edges.k_scale = 0.04f;
      edges.v_scale = 0.02f;
    }
    edges.head_size = t.head_size;
    edges.num_heads = 2 * group;
    edges.num_kv_heads = 2;
    edges.block_size = 7;
    edges.requests = std::move(edge);
    add(prefix + "TileEdges" + t.name, edges);
    GpuCase splits = edges;
    splits.layout = KvLayout::kHND;
    splits.block_size = 5;
    splits.num_heads = group;
    splits.num_kv_heads = 1;
    splits.requests = {{1, 30011}, {3, 40}};
    add(prefix + "ManySplitsHnd" + t.name, splits);
  };
  for (const TileShape& t : {TileShape{"G1D48", 48, KvCacheDType::kAuto},
                             TileShape{"G1D64Swizzled", 64, KvCacheDType::kAuto},
                             TileShape{"G1D112Fp8E5M2", 112, KvCacheDType::kFp8E5M2},
                             TileShape{"G1D128Fp8E4M3Swizzled", 128, KvCacheDType::kFp8E4M3},
                             TileShape{"G2D112", 112, KvCacheDType::kAuto},
                             TileShape{"G2D128Swizzled", 128, KvCacheDType::kAuto},
                             TileShape{"G2D240Fp8E4M3", 240, KvCacheDType::kFp8E4M3},
                             TileShape{"G4D144", 144, KvCacheDType::kAuto},
                             TileShape{"G4D256Swizzled", 256, KvCacheDType::kAuto}}) {
    add_tile_cases("Paged", t, 4,
                   {{1, 1}, {1, 31}, {1, 32}, {1, 33}, {1, 127}, {1, 128}, {1, 129}});
  }
  // Packed rows of different tokens in one CTA (`group` heads per KV head), each row with
  // its own window: per-row visible keys in the scoring lanes of every row group.
  const auto add_rows_across_tokens = [&](const std::string& name, int head_size, int group) {
    GpuCase rows;
    rows.backend = "CUDA_PAGED";
    rows.dtype = DType::kFloat16;
    rows.head_size = head_size;
    rows.num_heads = 4 * group;
    rows.num_kv_heads = 4;
    rows.sliding_window = 45;
    rows.soft_cap = 20.0f;
    rows.sinks = true;
    rows.requests = {{5, 700}, {1, 300}, {7, 7}, {2, 90}};
    add(name, rows);
  };
  for (const int d : {32, 128, 256}) {  // 3 heads per KV head, 4 rows per CTA
    add_rows_across_tokens("PagedRowsAcrossTokensWindowD" + std::to_string(d), d, 3);
  }
  // 8 packed rows per CTA (more than 4 query heads per KV head over a 16-bit cache of rows
  // up to 256 bytes; paged_rows_per_cta): 8 heads per KV head over two and four row groups
  // (16 and 8 keys a tile), K rows swizzled, padded and staged as they are; then 6 heads
  // per KV head, so that a CTA's 8 rows straddle tokens.
  const std::vector<std::pair<int, int>> eight_row_edges = {
      {1, 1},  {1, 7},  {1, 8},  {1, 9},  {1, 15}, {1, 16},  {1, 17},
      {1, 31}, {1, 33}, {1, 63}, {1, 64}, {1, 65}, {1, 129}, {40, 40}};
  for (const TileShape& t :
       {TileShape{"G2D64Swizzled", 64, KvCacheDType::kAuto},
        TileShape{"G2D80", 80, KvCacheDType::kAuto}, TileShape{"G2D112", 112, KvCacheDType::kAuto},
        TileShape{"G4D128Swizzled", 128, KvCacheDType::kAuto}}) {
    add_tile_cases("PagedEightRows", t, 8, eight_row_edges);
    add_rows_across_tokens(std::string("PagedEightRowsAcrossTokensWindow") + t.name, t.head_size,
                           6);
  }
  // CUDA_FLASH over fp8: a long GQA prefill through the large-row tiles (many key tiles in
  // every pipeline stage), and fp16 compute over e5m2 at head size 256 with soft-cap and a
  // split-KV decode row.
  GpuCase fp8_prefill = long_prefill;
  fp8_prefill.kv_dtype = KvCacheDType::kFp8E4M3;
  fp8_prefill.k_scale = 0.05f;
  fp8_prefill.v_scale = 0.03f;
  add("FlashPrefillGqaManyTilesD128KvFp8E4M3", fp8_prefill);
  GpuCase fp8_d256;
  fp8_d256.backend = "CUDA_FLASH";
  fp8_d256.dtype = DType::kFloat16;
  fp8_d256.kv_dtype = KvCacheDType::kFp8E5M2;
  fp8_d256.num_heads = 8;
  fp8_d256.num_kv_heads = 2;
  fp8_d256.head_size = 256;
  fp8_d256.soft_cap = 30.0f;
  fp8_d256.k_scale = 0.5f;
  fp8_d256.v_scale = 0.25f;
  fp8_d256.requests = {{1, 3000}, {40, 200}, {1, 1}};
  add("FlashKvFp8E5M2D256SoftCapFp16", fp8_d256);
  GpuCase fp8_sinks = long_prefill;
  fp8_sinks.kv_dtype = KvCacheDType::kFp8E4M3;
  fp8_sinks.k_scale = 0.06f;
  fp8_sinks.v_scale = 0.5f;
  fp8_sinks.sinks = true;
  fp8_sinks.sliding_window = 300;
  fp8_sinks.soft_cap = 25.0f;
  fp8_sinks.requests = {{500, 500}, {129, 640}};
  add("FlashPrefillFp8E4M3WindowSinksSoftCapD128", fp8_sinks);
  // Queries past fp16's range (|q| up to 1e5; bf16 holds them): CUDA_FLASH's fp8 decode
  // computes Q K^T in fp16, each query row brought into range by a power of two
  // that its scores divide out again. Few keys, so that the (sharp) softmax has no near
  // ties among its largest scores.
  for (KvCacheDType kv : {KvCacheDType::kFp8E4M3, KvCacheDType::kFp8E5M2}) {
    GpuCase big_q;
    big_q.backend = "CUDA_FLASH";
    big_q.dtype = DType::kBFloat16;
    big_q.kv_dtype = kv;
    big_q.num_heads = 16;
    big_q.num_kv_heads = 4;
    big_q.head_size = kv == KvCacheDType::kFp8E4M3 ? 128 : 64;
    big_q.q_range = 1.0e5f;
    big_q.k_scale = 0.01f;
    big_q.v_scale = 0.01f;
    big_q.requests = {{1, 37}, {1, 70}, {2, 25}};
    add(std::string("FlashKv") + (kv == KvCacheDType::kFp8E4M3 ? "Fp8E4M3" : "Fp8E5M2") +
            "QueriesPastFp16Range",
        big_q);
    // The Hopper prefill kernel does the same (its products are fp16 over fp8 caches):
    // 128-row tiles of chunks after cached keys, still few keys per row.
    GpuCase big_q_prefill = big_q;
    big_q_prefill.requests = {{64, 70}, {40, 45}};
    add(std::string("FlashPrefillKv") + (kv == KvCacheDType::kFp8E4M3 ? "Fp8E4M3" : "Fp8E5M2") +
            "QueriesPastFp16Range",
        big_q_prefill);
  }
  // Scales so large that almost every stored value is an fp8 subnormal (e4m3 below 2^-6,
  // e5m2 below 2^-14): CUDA_FLASH's conversions must keep them exactly (a
  // flush to zero would zero K and V).
  for (DType dtype : {DType::kBFloat16, DType::kFloat16}) {
    for (KvCacheDType kv : {KvCacheDType::kFp8E4M3, KvCacheDType::kFp8E5M2}) {
      GpuCase sub;
      sub.backend = "CUDA_FLASH";
      sub.dtype = dtype;
      sub.kv_dtype = kv;
      sub.num_heads = 8;
      sub.num_kv_heads = 2;
      sub.head_size = 128;
      sub.k_scale = sub.v_scale = kv == KvCacheDType::kFp8E4M3 ? 128.0f : 32768.0f;
      sub.requests = {{1, 700}, {30, 90}};
      add(std::string("FlashKv") + (kv == KvCacheDType::kFp8E4M3 ? "Fp8E4M3" : "Fp8E5M2") +
              "Subnormal" + (dtype == DType::kFloat16 ? "Fp16" : "Bf16"),
          sub);
      // The same through the Hopper prefill kernel, whose producer converts the tiles to
      // fp16 and whose consumers bring bf16 queries into fp16's range row by row.
      GpuCase sub_prefill = sub;
      sub_prefill.requests = {{300, 300}, {129, 400}};
      add(std::string("FlashPrefillKv") + (kv == KvCacheDType::kFp8E4M3 ? "Fp8E4M3" : "Fp8E5M2") +
              "Subnormal" + (dtype == DType::kFloat16 ? "Fp16" : "Bf16"),
          sub_prefill);
    }
  }
  return out;
}

class CudaGpuConformance : public ::testing::TestWithParam<NamedCase> {};

TEST_P(CudaGpuConformance, MatchesFp64DenseOracle) {
  if (!gpu_available()) GTEST_SKIP() << "no CUDA GPU on this machine (or a build without CUDA)";
  const GpuCase& c = GetParam().c;
  const GpuResult r = run_gpu_case(c);
  const double tol = tolerance(c.dtype);
  RecordProperty("rel_l2", std::to_string(r.rel_l2));
  EXPECT_EQ(r.non_finite, 0) << c.describe();
  EXPECT_LE(r.rel_l2, tol) << c.describe() << " max_abs " << r.max_abs;
  EXPECT_EQ(r.cache_mismatches, 0) << c.describe();
  EXPECT_GT(r.outputs, 0);
  std::printf("[ rel_l2 %.2e max_abs %.2e ] %s\n", r.rel_l2, r.max_abs, c.describe().c_str());
}

INSTANTIATE_TEST_SUITE_P(All, CudaGpuConformance, ::testing::ValuesIn(all_cases()),
                         [](const ::testing::TestParamInfo<NamedCase>& param_info) {
                           return param_info.param.name;
                         });

}  // namespace
}  // namespace attnkit::testing
