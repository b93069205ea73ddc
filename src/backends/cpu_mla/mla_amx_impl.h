#pragma once
// CPU_MLA on AMX tiles: bf16 queries and a bf16 latent cache on a CPU with AMX-BF16
// (mla_kernels_amx.cpp compiles this for AVX-512 + AMX; mla_attention.cpp picks it).
//
// The item is the same as mla_kernel_impl.h's (tokens x heads query rows over one key range
// of one latent stream); its rows are cut into groups of 16 (one tile's rows) and its keys
// visited in steps of kAmxStepKeys = 64, four 16-key tiles. Per step:
//   1. the latent rows are read where they lie: a 16-key tile is 16 rows of one page, loaded
//      by the tile loads straight from it (else, where its keys cross a page or the item's
//      end, from a staging copy, zero rows past the end); K and V are the same rows;
//   2. per row group, scores transposed: S^T [16 keys x 16 rows] = K [16 x D] . Q^T, the
//      D / 32 tile products accumulating in a tile register (Q^T is laid out once per item
//      as bf16 pairs [D / 2][16 rows]);
//   3. the online softmax runs with a row in each lane (no horizontal reductions): mask,
//      running maximum, p = exp(s - base) rounded to bf16 (the sum takes the same rounded
//      values), transposed into two A tiles per 16 keys: p in the first bf16 of each pair
//      (zeros in the second), and p in the second;
//   4. O [16 rows x DV] += P . V. With one row group, V's rows are the B tiles as they are
//      (no interleaving by key pairs): a B row holds 32 consecutive columns of one key, so
//      the first A tile takes its even columns and the second its odd ones, into two
//      16-column tiles of O, each tile product half used. With several (kAmxPairGroups or
//      more: many heads, or several tokens), the step's V rows are first interleaved by key
//      pairs, once for all groups, and each group's product is whole: half as many tile
//      products for the cost of one pass over 64 KiB. O keeps its columns in the order of
//      either form, restored once per item.
// The exponent base of a row moves only when the step's maximum exceeds it by more than
// kAmxRescaleSlack (e^8 ~ 3000: p and the sums stay far from fp32's range), so the
// accumulators are rescaled a few times per item instead of at every step; the output is
// O / l whatever the base, and split chunks pass the base on as their m for the merge.
// No software prefetch: the tiles read each page in order, which the hardware prefetchers
// follow (prefetching the next step's rows, spread or in a burst, measured slower).
//
// Requires `Ops` (simd_avx512.h), kernels/cpu/row_io.h's helpers, kernels/cpu/amx_tiles.h
// and mla_kernel_impl.h (merge_mla_split) in the including namespace, and mla_amx_layout.h
// included before it (outside the ISA namespace).

// An item's regions of the thread scratch (mla_amx_layout.h) and its sizes; start() lays
// out its rows (visible keys, zero accumulators, Q^T) and configures the tiles, finish()
// releases them and writes the rows (or the split partials). The two step loops below share
// them.
struct MlaAmxItem {
  const attnkit::PagedAttentionParams& p;
  const attnkit::cpu_mla::MlaWorkItem& item;
  int H, D, DV, rows, groups;
  uint16_t* qt;
  float* o;
  float* st;
  uint16_t* pa;
  uint16_t* ks;
  uint16_t* vi;
  float* m;
  float* l;
  int32_t* vb;
  int32_t* ve;
  const uint16_t* cache;
  const int32_t* table;

  MlaAmxItem(const attnkit::PagedAttentionParams& params, const attnkit::cpu_mla::MlaPlan& plan,
             const attnkit::cpu_mla::MlaWorkItem& work, float* scratch)
      : p(params), item(work) {
    using attnkit::cpu::kAmxRows;
    H = p.num_heads;
    D = p.head_size;
    DV = p.head_size_v;
    rows = (item.token_end - item.token_begin) * H;
    groups = (rows + kAmxRows - 1) / kAmxRows;
    const attnkit::cpu_mla::MlaAmxLayout lay = attnkit::cpu_mla::mla_amx_layout(groups, D, DV);
    // 64-byte aligned start (tile rows are 64 bytes).
    float* base = scratch + ((64 - reinterpret_cast<uintptr_t>(scratch) % 64) % 64) / 4;
    qt = reinterpret_cast<uint16_t*>(base + lay.qt);
    o = base + lay.o;
    st = base + lay.st;
    pa = reinterpret_cast<uint16_t*>(base + lay.pa);
    ks = reinterpret_cast<uint16_t*>(base + lay.ks);
    vi = reinterpret_cast<uint16_t*>(base + lay.vi);
    m = base + lay.m;
    l = base + lay.l;
    vb = reinterpret_cast<int32_t*>(base + lay.vis);
    ve = vb + int64_t{groups} * kAmxRows;
    cache = static_cast<const uint16_t*>(p.k_cache);
    table = p.block_table + int64_t{item.seq} * p.block_table_stride;

    // Each row's visible keys, cut to the item's range (padding rows see none).
    const int q0 = p.query_start_loc[item.seq];
    const int q_len = p.query_start_loc[item.seq + 1] - q0;
    const int kv_len = p.seq_lens[item.seq];
    for (int r = 0; r < groups * kAmxRows; ++r) {
      vb[r] = ve[r] = 0;
      m[r] = -__builtin_inff();
      l[r] = 0.0f;
      if (r >= rows) continue;
      const int pos = attnkit::query_position(q_len, kv_len, item.token_begin + r / H - q0);
      const attnkit::KeySpan span = attnkit::visible_keys(plan.mask, pos, kv_len);
      vb[r] = std::max(span.begin, item.key_begin);
      ve[r] = std::min(span.end, item.key_end);
    }
    std::fill(o, o + int64_t{groups} * kAmxRows * DV, 0.0f);

    // Q^T of each row group as bf16 pairs (rows past the item's are zeros).
    const auto* qbase = static_cast<const uint16_t*>(p.q);
    for (int g = 0; g < groups; ++g) {
      const uint16_t* qrows[kAmxRows];
      for (int i = 0; i < kAmxRows; ++i) {
        const int r = g * kAmxRows + i;
        const int64_t t = item.token_begin + r / H, h = r % H;
        qrows[i] = r < rows ? qbase + t * p.q_token_stride + h * p.q_head_stride : nullptr;
      }
      amx_transpose_rows(qrows, D, qt + int64_t{g} * D * kAmxRows);
    }
    amx_configure();
  }

  // Key `key`'s latent row in the paged cache.
  const uint16_t* row_of(int key) const {
    return cache + int64_t{table[key / p.block_size]} * p.k_block_stride +
           int64_t{key % p.block_size} * p.k_token_stride;
  }

  // The step's 16-key tiles (amx_step_tiles): keys outside [key_begin, key_end) are never read
  // (a sliding window's earlier pages may be freed), a tile holding any of them is staged
  // with zero rows there.
  void step_tiles(int k0, int tiles, const uint16_t** ka, int64_t* ka_stride) const {
    amx_step_tiles([this](int key) { return row_of(key); }, k0, tiles, item.key_begin, item.key_end,
                   p.block_size, p.k_token_stride * 2, D, ks, ka, ka_stride);
  }

  template <AmxPLayout L>
  void finish(attnkit::cpu_mla::MlaWorkspace& ws) const {
    _tile_release();
    amx_restore_columns<L>(o, rows, DV);
    const int64_t qsize = element_size(p.q_dtype);
    if (item.num_splits == 1) {
      for (int r = 0; r < rows; ++r) {
        const int64_t t = item.token_begin + r / H, h = r % H;
        char* dst =
            static_cast<char*>(p.out) + (t * p.o_token_stride + h * p.o_head_stride) * qsize;
        // A row that saw no key writes zeros (o is zero there).
        const float factor = l[r] > 0.0f ? p.k_scale / l[r] : 0.0f;
        store_row(p.q_dtype, o + int64_t{r} * DV, factor, dst, DV);
      }
      return;
    }
    for (int r = 0; r < rows; ++r) {
      const int64_t pr = item.partial_row + r;
      std::copy(o + int64_t{r} * DV, o + int64_t{r + 1} * DV, ws.partial_out.data() + pr * DV);
      ws.partial_ml[static_cast<size_t>(2 * pr)] = m[r];
      ws.partial_ml[static_cast<size_t>(2 * pr + 1)] = l[r];
    }
  }
};

// One row group: steps of kAmxStepKeys keys, the even/odd form (V's rows as they lie). Steps
// start on a multiple of 16 keys so that a tile's rows can be one page's.
inline void mla_amx_item(const attnkit::PagedAttentionParams& p,
                         const attnkit::cpu_mla::MlaPlan& plan,
                         const attnkit::cpu_mla::MlaWorkItem& item,
                         attnkit::cpu_mla::MlaWorkspace& ws, float* scratch) {
  using attnkit::cpu::kAmxRows;
  using attnkit::cpu::kAmxStepKeys;
  const MlaAmxItem it(p, plan, item, scratch);
  const int D = it.D, DV = it.DV;
  const float scale = p.scale * p.k_scale;
  for (int k0 = item.key_begin - item.key_begin % 16; k0 < item.key_end; k0 += kAmxStepKeys) {
    const int keys = std::min(kAmxStepKeys, item.key_end - k0);
    const int subs = (keys + 15) / 16;
    const uint16_t* ka[4];
    int64_t ka_stride[4];
    // Scores and values read the same latent rows.
    it.step_tiles(k0, subs, ka, ka_stride);
    for (int g = 0; g < it.groups; ++g) {
      const int64_t r0 = int64_t{g} * kAmxRows;
      amx_scores(ka, ka_stride, subs, it.qt + r0 * D, D, it.st);
      amx_softmax(it.st, keys, k0, it.vb + r0, it.ve + r0, scale, 0.0f, it.m + r0, it.l + r0,
                  it.o + r0 * DV, DV, it.pa);
      amx_values(it.o + r0 * DV, DV, it.pa, ka, ka_stride, subs);
    }
  }
  it.finish<AmxPLayout::kEvenOdd>(ws);
}

// Two or more row groups: steps of kAmxPairStepKeys keys, the key-pair form (amx_tiles.h).
inline void mla_amx_pair_item(const attnkit::PagedAttentionParams& p,
                              const attnkit::cpu_mla::MlaPlan& plan,
                              const attnkit::cpu_mla::MlaWorkItem& item,
                              attnkit::cpu_mla::MlaWorkspace& ws, float* scratch) {
  using attnkit::cpu::kAmxPairStepKeys;
  using attnkit::cpu::kAmxRows;
  const MlaAmxItem it(p, plan, item, scratch);
  const int D = it.D, DV = it.DV, groups = it.groups;
  const float scale = p.scale * p.k_scale;
  float* st1 = it.st + int64_t{kAmxPairStepKeys} * kAmxRows;
  uint16_t* pa1 = it.pa + int64_t{kAmxPairStepKeys} * kAmxRows;
  for (int k0 = item.key_begin - item.key_begin % 16; k0 < item.key_end; k0 += kAmxPairStepKeys) {
    const int keys = std::min(kAmxPairStepKeys, item.key_end - k0);
    const int subs = (keys + 15) / 16, chunks = (keys + 31) / 32;
    const uint16_t* ka[kAmxPairStepKeys / 16];
    int64_t ka_stride[kAmxPairStepKeys / 16];
    it.step_tiles(k0, subs, ka, ka_stride);
    // V's rows by key pairs, once for every group; then the groups two at a time (2 x 2
    // tile blocks in the scores and the values), a last odd one alone.
    amx_interleave_values(ka, ka_stride, subs, DV, it.vi);
    int g = 0;
    for (; g + 2 <= groups; g += 2) {
      const int64_t r0 = int64_t{g} * kAmxRows, r1 = r0 + kAmxRows;
      amx_scores2(ka, ka_stride, subs, it.qt + r0 * D, it.qt + r1 * D, D, it.st, st1);
      amx_softmax<AmxPLayout::kKeyPairs>(it.st, keys, k0, it.vb + r0, it.ve + r0, scale, 0.0f,
                                         it.m + r0, it.l + r0, it.o + r0 * DV, DV, it.pa);
      amx_softmax<AmxPLayout::kKeyPairs>(st1, keys, k0, it.vb + r1, it.ve + r1, scale, 0.0f,
                                         it.m + r1, it.l + r1, it.o + r1 * DV, DV, pa1);
      amx_values_pairs2(it.o + r0 * DV, it.o + r1 * DV, DV, it.pa, pa1, it.vi, chunks);
    }
    if (g < groups) {
      const int64_t r0 = int64_t{g} * kAmxRows;
      for (int t = 0; t < subs; t += 4) {
        amx_scores(ka + t, ka_stride + t, std::min(4, subs - t), it.qt + r0 * D, D,
                   it.st + int64_t{256} * t);
      }
      amx_softmax<AmxPLayout::kKeyPairs>(it.st, keys, k0, it.vb + r0, it.ve + r0, scale, 0.0f,
                                         it.m + r0, it.l + r0, it.o + r0 * DV, DV, it.pa);
      amx_values_pairs(it.o + r0 * DV, DV, it.pa, it.vi, chunks);
    }
  }
  it.finish<AmxPLayout::kKeyPairs>(ws);
}

// Row groups from which an item takes the key-pair path (mla_amx_pair_item).
inline constexpr int kAmxPairGroups = 2;

inline void mla_amx_any_item(const attnkit::PagedAttentionParams& p,
                             const attnkit::cpu_mla::MlaPlan& plan,
                             const attnkit::cpu_mla::MlaWorkItem& item,
                             attnkit::cpu_mla::MlaWorkspace& ws, float* scratch) {
  const int rows = (item.token_end - item.token_begin) * p.num_heads;
  if ((rows + attnkit::cpu::kAmxRows - 1) / attnkit::cpu::kAmxRows >= kAmxPairGroups) {
    mla_amx_pair_item(p, plan, item, ws, scratch);
  } else {
    mla_amx_item(p, plan, item, ws, scratch);
  }
}

inline void run_mla_amx(const attnkit::PagedAttentionParams& p,
                        const attnkit::cpu_mla::MlaPlan& plan, attnkit::cpu_mla::MlaWorkspace& ws) {
  run_mla_items<&mla_amx_any_item>(p, plan, ws);
}
