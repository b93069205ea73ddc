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

inline void mla_amx_item(const attnkit::PagedAttentionParams& p,
                         const attnkit::cpu_mla::MlaPlan& plan,
                         const attnkit::cpu_mla::MlaWorkItem& item,
                         attnkit::cpu_mla::MlaWorkspace& ws, float* scratch) {
  using attnkit::cpu::kAmxRows;
  using attnkit::cpu::kAmxStepKeys;
  const int H = p.num_heads, D = p.head_size, DV = p.head_size_v;
  const int tokens = item.token_end - item.token_begin;
  const int rows = tokens * H;
  const int groups = (rows + kAmxRows - 1) / kAmxRows;
  const attnkit::cpu_mla::MlaAmxLayout lay = attnkit::cpu_mla::mla_amx_layout(groups, D, DV);
  // 64-byte aligned start (the workspace vector is only float-aligned).
  float* base = scratch + ((64 - reinterpret_cast<uintptr_t>(scratch) % 64) % 64) / 4;
  auto* qt = reinterpret_cast<uint16_t*>(base + lay.qt);
  float* o = base + lay.o;
  float* st = base + lay.st;
  auto* pa = reinterpret_cast<uint16_t*>(base + lay.pa);
  auto* ks = reinterpret_cast<uint16_t*>(base + lay.ks);
  float* m = base + lay.m;
  float* l = base + lay.l;
  auto* vb = reinterpret_cast<int32_t*>(base + lay.vis);
  int32_t* ve = vb + int64_t{groups} * kAmxRows;

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
  const auto* cache = static_cast<const uint16_t*>(p.k_cache);
  const int32_t* table = p.block_table + int64_t{item.seq} * p.block_table_stride;
  const auto row_of = [&](int key) {
    return cache + int64_t{table[key / p.block_size]} * p.k_block_stride +
           int64_t{key % p.block_size} * p.k_token_stride;
  };
  const float scale = p.scale * p.k_scale;
  // Steps start on a multiple of 16 keys so that a tile's rows can be one page's. Keys
  // outside [key_begin, key_end) are never read (a sliding window's earlier pages may be
  // freed): a tile holding any of them is staged with zero rows there, and masked.
  for (int k0 = item.key_begin - item.key_begin % 16; k0 < item.key_end; k0 += kAmxStepKeys) {
    const int keys = std::min(kAmxStepKeys, item.key_end - k0);
    const int subs = (keys + 15) / 16;
    const uint16_t* ka[4];
    int64_t ka_stride[4];
    // Scores and values read the same latent rows.
    amx_step_tiles(row_of, k0, subs, item.key_begin, item.key_end, p.block_size,
                   p.k_token_stride * 2, D, ks, ka, ka_stride);
    for (int g = 0; g < groups; ++g) {
      const int64_t r0 = int64_t{g} * kAmxRows;
      amx_scores(ka, ka_stride, subs, qt + r0 * D, D, st);
      amx_softmax(st, keys, k0, vb + r0, ve + r0, scale, 0.0f, m + r0, l + r0, o + r0 * DV, DV, pa);
      amx_values(o + r0 * DV, DV, pa, ka, ka_stride, subs);
    }
  }
  _tile_release();
  amx_restore_columns(o, rows, DV);

  const int64_t qsize = element_size(p.q_dtype);
  if (item.num_splits == 1) {
    for (int r = 0; r < rows; ++r) {
      const int64_t t = item.token_begin + r / H, h = r % H;
      char* dst = static_cast<char*>(p.out) + (t * p.o_token_stride + h * p.o_head_stride) * qsize;
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

// The same item with two or more row groups: the key-pair form (amx_tiles.h), steps of
// kAmxPairStepKeys keys.
inline void mla_amx_pair_item(const attnkit::PagedAttentionParams& p,
                              const attnkit::cpu_mla::MlaPlan& plan,
                              const attnkit::cpu_mla::MlaWorkItem& item,
                              attnkit::cpu_mla::MlaWorkspace& ws, float* scratch) {
  using attnkit::cpu::kAmxPairStepKeys;
  using attnkit::cpu::kAmxRows;
  const int H = p.num_heads, D = p.head_size, DV = p.head_size_v;
  const int tokens = item.token_end - item.token_begin;
  const int rows = tokens * H;
  const int groups = (rows + kAmxRows - 1) / kAmxRows;
  const attnkit::cpu_mla::MlaAmxLayout lay = attnkit::cpu_mla::mla_amx_layout(groups, D, DV);
  // 64-byte aligned start (the workspace vector is only float-aligned).
  float* base = scratch + ((64 - reinterpret_cast<uintptr_t>(scratch) % 64) % 64) / 4;
  auto* qt = reinterpret_cast<uint16_t*>(base + lay.qt);
  float* o = base + lay.o;
  float* st = base + lay.st;
  auto* pa = reinterpret_cast<uint16_t*>(base + lay.pa);
  auto* ks = reinterpret_cast<uint16_t*>(base + lay.ks);
  auto* vi = reinterpret_cast<uint16_t*>(base + lay.vi);
  float* m = base + lay.m;
  float* l = base + lay.l;
  auto* vb = reinterpret_cast<int32_t*>(base + lay.vis);
  int32_t* ve = vb + int64_t{groups} * kAmxRows;

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
  const auto* cache = static_cast<const uint16_t*>(p.k_cache);
  const int32_t* table = p.block_table + int64_t{item.seq} * p.block_table_stride;
  const auto row_of = [&](int key) {
    return cache + int64_t{table[key / p.block_size]} * p.k_block_stride +
           int64_t{key % p.block_size} * p.k_token_stride;
  };
  const float scale = p.scale * p.k_scale;
  // Steps start on a multiple of 16 keys so that a tile's rows can be one page's. Keys
  // outside [key_begin, key_end) are never read (a sliding window's earlier pages may be
  // freed): a tile holding any of them is staged with zero rows there, and masked.
  float* st1 = st + int64_t{kAmxPairStepKeys} * kAmxRows;
  uint16_t* pa1 = pa + int64_t{kAmxPairStepKeys} * kAmxRows;
  for (int k0 = item.key_begin - item.key_begin % 16; k0 < item.key_end; k0 += kAmxPairStepKeys) {
    const int keys = std::min(kAmxPairStepKeys, item.key_end - k0);
    const int subs = (keys + 15) / 16, chunks = (keys + 31) / 32;
    const uint16_t* ka[kAmxPairStepKeys / 16];
    int64_t ka_stride[kAmxPairStepKeys / 16];
    amx_step_tiles(row_of, k0, subs, item.key_begin, item.key_end, p.block_size,
                   p.k_token_stride * 2, D, ks, ka, ka_stride);
    // V's rows by key pairs, once for every group; then the groups two at a time (2 x 2
    // tile blocks in the scores and the values), a last odd one alone.
    amx_interleave_values(ka, ka_stride, subs, DV, vi);
    int g = 0;
    for (; g + 2 <= groups; g += 2) {
      const int64_t r0 = int64_t{g} * kAmxRows, r1 = r0 + kAmxRows;
      amx_scores2(ka, ka_stride, subs, qt + r0 * D, qt + r1 * D, D, st, st1);
      amx_softmax<AmxPLayout::kKeyPairs>(st, keys, k0, vb + r0, ve + r0, scale, 0.0f, m + r0,
                                         l + r0, o + r0 * DV, DV, pa);
      amx_softmax<AmxPLayout::kKeyPairs>(st1, keys, k0, vb + r1, ve + r1, scale, 0.0f, m + r1,
                                         l + r1, o + r1 * DV, DV, pa1);
      amx_values_pairs2(o + r0 * DV, o + r1 * DV, DV, pa, pa1, vi, chunks);
    }
    if (g < groups) {
      const int64_t r0 = int64_t{g} * kAmxRows;
      for (int t = 0; t < subs; t += 4) {
        amx_scores(ka + t, ka_stride + t, std::min(4, subs - t), qt + r0 * D, D,
                   st + int64_t{256} * t);
      }
      amx_softmax<AmxPLayout::kKeyPairs>(st, keys, k0, vb + r0, ve + r0, scale, 0.0f, m + r0,
                                         l + r0, o + r0 * DV, DV, pa);
      amx_values_pairs(o + r0 * DV, DV, pa, vi, chunks);
    }
  }
  _tile_release();
  amx_restore_columns<AmxPLayout::kKeyPairs>(o, rows, DV);

  const int64_t qsize = element_size(p.q_dtype);
  if (item.num_splits == 1) {
    for (int r = 0; r < rows; ++r) {
      const int64_t t = item.token_begin + r / H, h = r % H;
      char* dst = static_cast<char*>(p.out) + (t * p.o_token_stride + h * p.o_head_stride) * qsize;
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
