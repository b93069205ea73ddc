// The CPU flash kernels against the dense fp64 oracle (attention_case.h), for every SIMD
// target this machine runs, with one thread and with all threads.

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "attention_case.h"
#include "attnkit/kernels/cpu_isa.h"
#include "backends/cpu_flash/flash_attention.h"

namespace attnkit::cpu {
namespace {

using testing::AttentionCase;
using testing::CaseSpec;

// Runs `spec` on `isa` (with the AMX tile kernels on or off) with `threads` threads and the
// given plan options; expects the output within tolerance of the oracle.
void expect_matches(const CaseSpec& spec, CpuIsa isa, bool amx, int threads,
                    FlashPlanOptions options = {},
                    std::optional<testing::Tolerance> tolerance = std::nullopt) {
  AttentionCase c(spec);
  c.clear_output();
  const PagedAttentionParams p = c.params();
  options.num_threads = threads;
  const FlashPlan plan = make_flash_plan(p, options);
  FlashWorkspace ws;
  set_cpu_amx_override(amx);
  flash_attention(p, plan, ws, isa);
  set_cpu_amx_override(std::nullopt);
  std::string where;
  const double excess =
      tolerance ? c.worst_violation(&where, *tolerance) : c.worst_violation(&where);
  EXPECT_LE(excess, 0.0) << spec.describe() << " isa " << to_string(isa) << (amx ? " + amx" : "")
                         << " threads " << threads << ": " << where;
}

// Every (target, threads) combination; the avx512 target also with its AMX tile kernels
// where the machine runs them.
void expect_matches_everywhere(const CaseSpec& spec, FlashPlanOptions options = {}) {
  for (CpuIsa isa : runnable_cpu_isas()) {
    for (int threads : {1, omp_get_max_threads()}) {
      expect_matches(spec, isa, false, threads, options);
      if (isa == CpuIsa::kAvx512 && amx_bf16_available()) {
        expect_matches(spec, isa, true, threads, options);
      }
    }
  }
}

// Forces splitting on even short contexts, so the merge path runs.
FlashPlanOptions forced_splits() {
  FlashPlanOptions o;
  o.min_split_keys = 16;
  o.target_items_per_thread = 64;
  return o;
}

TEST(CpuFlashKernel, DecodeGqaBf16OverLongAndShortContexts) {
  CaseSpec s;
  s.num_heads = 8;
  s.num_kv_heads = 2;
  s.head_size = s.head_size_v = 128;
  s.q_dtype = s.kv_dtype = ScalarType::kBFloat16;
  s.q_lens = {1, 1, 1, 1};
  s.kv_lens = {1, 17, 300, 2100};
  expect_matches_everywhere(s);
  s.seed = 2;
  expect_matches_everywhere(s, forced_splits());
  // One item per KV head instead of head-packed items.
  FlashPlanOptions unpacked = forced_splits();
  unpacked.max_packed_head_rows = 0;
  s.seed = 3;
  expect_matches_everywhere(s, unpacked);
}

TEST(CpuFlashKernel, PrefillAndMixedBatchCausalFp32Hnd) {
  CaseSpec s;
  s.num_heads = 6;
  s.num_kv_heads = 3;
  s.head_size = s.head_size_v = 64;
  s.hnd = true;
  s.block_size = 8;
  s.q_lens = {1, 37, 5, 70};
  s.kv_lens = {1, 100, 5, 300};
  expect_matches_everywhere(s);
  // The wider prefill tiles CPU_FLASH plans where its AVX2 kernels run.
  FlashPlanOptions wide;
  wide.rows_per_tile = kOuterRowsPerTile;
  expect_matches_everywhere(s, wide);
}

TEST(CpuFlashKernel, SlidingWindowWithSinksFp16) {
  CaseSpec s;
  s.num_heads = 4;
  s.num_kv_heads = 1;
  s.head_size = s.head_size_v = 80;
  s.q_dtype = s.kv_dtype = ScalarType::kFloat16;
  s.block_size = 32;
  s.q_lens = {1, 40, 3};
  s.kv_lens = {500, 90, 1000};
  s.sliding_window = 33;
  s.sinks = true;
  expect_matches_everywhere(s);
  s.seed = 3;
  expect_matches_everywhere(s, forced_splits());
}

TEST(CpuFlashKernel, ChunkedLocalWithSoftCapOverFp8E4m3) {
  CaseSpec s;
  s.num_heads = 8;
  s.num_kv_heads = 4;
  s.head_size = s.head_size_v = 96;
  s.q_dtype = ScalarType::kBFloat16;
  s.kv_dtype = ScalarType::kFp8E4M3;
  s.k_scale = 0.05f;
  s.v_scale = 0.02f;
  s.q_lens = {1, 20, 64};
  s.kv_lens = {700, 150, 64};
  s.chunk_size = 48;
  s.soft_cap = 1.5f;
  expect_matches_everywhere(s);
}

TEST(CpuFlashKernel, CrossAttentionNonCausalOverFp8E5m2) {
  CaseSpec s;
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.head_size = s.head_size_v = 64;
  s.kv_dtype = ScalarType::kFp8E5M2;
  s.k_scale = 2.0f;
  s.v_scale = 0.5f;
  s.causal = false;
  s.q_lens = {3, 1, 20};
  s.kv_lens = {50, 1500, 7};
  expect_matches_everywhere(s);
}

TEST(CpuFlashKernel, EncoderOnlyContiguousNonCausal) {
  CaseSpec s;
  s.num_heads = 12;
  s.num_kv_heads = 12;
  s.head_size = s.head_size_v = 64;
  s.contiguous = true;
  s.causal = false;
  s.q_lens = {9, 128, 1};
  s.kv_lens = {9, 128, 1};
  expect_matches_everywhere(s);
  s.q_dtype = s.kv_dtype = ScalarType::kBFloat16;
  expect_matches_everywhere(s);
}

TEST(CpuFlashKernel, MlaLatentWithValuePrefix) {
  CaseSpec s;
  s.num_heads = 16;
  s.num_kv_heads = 1;
  s.head_size = 576;
  s.head_size_v = 512;
  s.mla = true;
  s.q_dtype = s.kv_dtype = ScalarType::kBFloat16;
  s.block_size = 64;
  s.q_lens = {1, 1, 6};
  s.kv_lens = {1, 400, 70};
  expect_matches_everywhere(s);
  s.seed = 4;
  s.q_dtype = ScalarType::kFloat32;
  s.kv_dtype = ScalarType::kFp8E4M3;
  s.k_scale = s.v_scale = 0.01f;
  s.q_lens = {1, 1};
  s.kv_lens = {900, 33};
  expect_matches_everywhere(s, forced_splits());
}

TEST(CpuFlashKernel, SeparateValueHeadSize) {
  CaseSpec s;
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.head_size = 192;
  s.head_size_v = 128;
  s.q_dtype = s.kv_dtype = ScalarType::kBFloat16;
  s.q_lens = {1, 30};
  s.kv_lens = {260, 45};
  expect_matches_everywhere(s);
  s.head_size = 48;
  s.head_size_v = 112;
  s.q_dtype = ScalarType::kFloat16;
  s.kv_dtype = ScalarType::kFloat32;
  expect_matches_everywhere(s);
}

// Block sizes the backend declares (any): tiny, odd, and larger than a key tile.
TEST(CpuFlashKernel, AnyBlockSize) {
  for (int bs : {1, 3, 16, 17, 64, 256}) {
    CaseSpec s;
    s.block_size = bs;
    s.head_size = s.head_size_v = 32;
    s.q_dtype = s.kv_dtype = ScalarType::kBFloat16;
    s.q_lens = {1, 11};
    s.kv_lens = {333, 40};
    s.seed = static_cast<uint64_t>(bs);
    expect_matches_everywhere(s);
  }
}

// Every head size the backend declares (multiples of 16 up to 576), each on one target in
// turn, with K and V head sizes that differ too.
TEST(CpuFlashKernel, EveryDeclaredHeadSize) {
  const std::vector<CpuIsa> isas = runnable_cpu_isas();
  int i = 0;
  for (int d = 16; d <= 576; d += 16, ++i) {
    CaseSpec s;
    s.num_heads = 2;
    s.num_kv_heads = 1;
    s.head_size = d;
    s.head_size_v = (i % 3 == 0) ? std::max(16, 592 - d) : d;
    s.q_dtype = i % 2 == 0 ? ScalarType::kBFloat16 : ScalarType::kFloat32;
    s.kv_dtype = i % 2 == 0 ? ScalarType::kBFloat16 : ScalarType::kFloat16;
    s.q_lens = {1, 5};
    s.kv_lens = {40, 21};
    s.seed = static_cast<uint64_t>(100 + d);
    const CpuIsa isa = isas[static_cast<size_t>(i) % isas.size()];
    expect_matches(s, isa, false, 1 + i % 2);
    // bf16 on the AMX tile kernels too, where the machine runs them (head sizes that are
    // not multiples of 32 take the avx512 kernels there: also checked).
    if (s.q_dtype == ScalarType::kBFloat16 && amx_bf16_available()) {
      s.kv_dtype = ScalarType::kBFloat16;
      expect_matches(s, CpuIsa::kAvx512, true, 2);
    }
  }
}

// The AMX tile kernels (bf16 queries and cache, head sizes multiples of 32) across the
// features they serve, unsplit and with every request split, against the fp64 oracle:
// head-packed decode with 8 query heads per KV head, causal prefill mixed with decode of 4
// (the decode items take the dot kernels: kAmxMinRows) over an HND cache, a sliding
// window with sinks over 5-token pages (tiles staged across pages), chunked-local attention
// with a soft-cap at d256 without GQA, a contiguous non-causal encoder, an MLA-shaped latent
// cache (V the first 512 of each 576-wide row), and d80, which is not theirs (the avx512
// kernels take it). Tolerance: bf16 output rounding (1e-3 + 6e-3 |want|) plus the rounding
// of every probability to bf16 (2^-9 relative), which the tile products take as the
// avx512_bf16 dot kernels do: at most 2^-9 max |v| = 2e-3 more, seen on rows of few keys
// (both kernels give the same outputs there).
TEST(CpuFlashKernel, AmxTilesAcrossTheirFeatures) {
  if (!amx_bf16_available()) GTEST_SKIP() << "this machine cannot run AMX-BF16 tile kernels";
  std::vector<CaseSpec> specs;
  CaseSpec s;
  s.q_dtype = s.kv_dtype = ScalarType::kBFloat16;
  s.num_heads = 64;
  s.num_kv_heads = 8;
  s.head_size = s.head_size_v = 128;
  s.q_lens = {1, 1, 1};
  s.kv_lens = {4000, 300, 17};
  specs.push_back(s);
  s.num_heads = 8;
  s.num_kv_heads = 2;
  s.hnd = true;
  s.q_lens = {37, 1, 300};
  s.kv_lens = {37, 600, 300};
  specs.push_back(s);
  s.hnd = false;
  s.num_heads = 4;
  s.num_kv_heads = 1;
  s.head_size = s.head_size_v = 64;
  s.block_size = 5;
  s.sliding_window = 50;
  s.sinks = true;
  s.q_lens = {40, 1, 7};
  s.kv_lens = {40, 600, 333};
  specs.push_back(s);
  s.sliding_window = 0;
  s.sinks = false;
  s.block_size = 64;
  s.num_heads = s.num_kv_heads = 8;
  s.head_size = s.head_size_v = 256;
  s.chunk_size = 64;
  s.soft_cap = 30.0f;
  s.q_lens = {100, 1};
  s.kv_lens = {300, 250};
  specs.push_back(s);
  s.chunk_size = 0;
  s.soft_cap = 0.0f;
  s.block_size = 16;
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.head_size = s.head_size_v = 128;
  s.contiguous = true;
  s.causal = false;
  s.q_lens = {30, 17};
  s.kv_lens = {30, 17};
  specs.push_back(s);
  s.contiguous = false;
  s.causal = true;
  s.mla = true;
  s.num_heads = 16;
  s.num_kv_heads = 1;
  s.head_size = 576;
  s.head_size_v = 512;
  s.q_lens = {1, 9};
  s.kv_lens = {700, 130};
  specs.push_back(s);
  s.mla = false;
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.head_size = s.head_size_v = 80;
  s.q_lens = {1, 20};
  s.kv_lens = {500, 20};
  specs.push_back(s);
  uint64_t seed = 500;
  for (CaseSpec& spec : specs) {
    spec.seed = ++seed;
    const testing::Tolerance rounded_p{3e-3, 6e-3};
    expect_matches(spec, CpuIsa::kAvx512, true, 2, {}, rounded_p);
    expect_matches(spec, CpuIsa::kAvx512, true, 2, forced_splits(), rounded_p);
  }
}

// NaN in one key of a bf16 cache on the AMX tile kernels: the rows that see it show NaN,
// every other row (other requests, the other KV head) stays exact.
TEST(CpuFlashKernel, AmxTilesKeepNanInItsAffectedRows) {
  if (!amx_bf16_available()) GTEST_SKIP() << "this machine cannot run AMX-BF16 tile kernels";
  CaseSpec s;
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.head_size = s.head_size_v = 64;
  s.q_dtype = s.kv_dtype = ScalarType::kBFloat16;
  s.q_lens = {1, 1};
  s.kv_lens = {300, 2100};
  for (bool split : {false, true}) {
    SCOPED_TRACE(split ? "split" : "unsplit");
    AttentionCase c(s);
    const PagedAttentionParams p = c.params();
    // Request 1, position 5, KV head 0: query heads 0 and 1 see it.
    const int64_t block = c.block_table()[static_cast<size_t>(c.max_blocks()) + 5 / 16];
    reinterpret_cast<uint16_t*>(
        c.k_bytes().data())[block * p.k_block_stride + (5 % 16) * p.k_token_stride + 3] = 0x7fc0;
    c.clear_output();
    FlashPlanOptions options = split ? forced_splits() : FlashPlanOptions{};
    options.num_threads = 2;
    const FlashPlan plan = make_flash_plan(p, options);
    FlashWorkspace ws;
    set_cpu_amx_override(true);
    flash_attention(p, plan, ws, CpuIsa::kAvx512);
    set_cpu_amx_override(std::nullopt);
    const testing::Tolerance tol = testing::tolerance_for(ScalarType::kBFloat16);
    for (int t = 0; t < 2; ++t) {
      for (int h = 0; h < 4; ++h) {
        for (int d = 0; d < 64; ++d) {
          const float got = c.output(t, h, d);
          if (t == 1 && h < 2) {
            ASSERT_TRUE(std::isnan(got)) << "token " << t << " head " << h << " dim " << d;
          } else {
            const double want = c.expected()[static_cast<size_t>((t * 4 + h) * 64 + d)];
            ASSERT_NEAR(got, want, tol.atol + tol.rtol * std::abs(want))
                << "token " << t << " head " << h << " dim " << d;
          }
        }
      }
    }
  }
}

// Queries that see no key (causal with more queries than keys) write zeros; with sinks too.
TEST(CpuFlashKernel, QueriesThatSeeNothingWriteZeros) {
  CaseSpec s;
  s.q_lens = {6};
  s.kv_lens = {3};  // the first 3 queries sit at negative positions
  s.sinks = true;
  expect_matches_everywhere(s);
}

// NaN in one request's query or in one of its cached keys makes exactly the affected rows
// of that request NaN, on every target, unsplit and split (the merge keeps it); the other
// rows stay finite and right.
TEST(CpuFlashKernel, NanInARequestShowsInItsAffectedRowsOnly) {
  CaseSpec s;
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.head_size = s.head_size_v = 64;
  s.q_lens = {1, 1};
  s.kv_lens = {300, 2100};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (bool poison_key : {false, true}) {
    for (CpuIsa isa : runnable_cpu_isas()) {
      for (bool split : {false, true}) {
        SCOPED_TRACE(std::string(poison_key ? "key" : "query") + " isa " +
                     std::string(to_string(isa)) + (split ? " split" : " unsplit"));
        AttentionCase c(s);
        const PagedAttentionParams p = c.params();
        if (poison_key) {  // request 1, position 5, KV head 0: query heads 0 and 1 see it
          const int64_t block = c.block_table()[static_cast<size_t>(c.max_blocks()) + 5 / 16];
          reinterpret_cast<float*>(
              c.k_bytes().data())[block * p.k_block_stride + (5 % 16) * p.k_token_stride + 3] = nan;
        } else {  // request 1 (token 1), query head 0
          reinterpret_cast<float*>(c.q_bytes().data())[c.q_token_stride() + 3] = nan;
        }
        c.clear_output();
        FlashPlanOptions options = split ? forced_splits() : FlashPlanOptions{};
        options.num_threads = 2;
        const FlashPlan plan = make_flash_plan(p, options);
        if (split) {
          ASSERT_FALSE(plan.merges.empty());
        }
        FlashWorkspace ws;
        flash_attention(p, plan, ws, isa);
        for (int t = 0; t < 2; ++t) {
          for (int h = 0; h < 4; ++h) {
            const bool poisoned = t == 1 && (h == 0 || (poison_key && h == 1));
            for (int d = 0; d < 64; ++d) {
              const float got = c.output(t, h, d);
              if (poisoned) {
                ASSERT_TRUE(std::isnan(got)) << "token " << t << " head " << h << " dim " << d;
              } else {
                const double want = c.expected()[static_cast<size_t>((t * 4 + h) * 64 + d)];
                ASSERT_NEAR(got, want, 1e-4) << "token " << t << " head " << h << " dim " << d;
              }
            }
          }
        }
      }
    }
  }
}

TEST(CpuFlashPlan, SplitsOnlyWhenThreadsWouldIdleAndPartitionTheKeys) {
  const std::vector<int32_t> qsl{0, 1};
  const std::vector<int32_t> lens{16384};
  FlashPlanOptions o;
  o.num_threads = 16;
  const FlashPlan split = make_flash_plan(qsl, lens, 32, 8, 128, 128, MaskRule{}, o);
  ASSERT_FALSE(split.merges.empty());
  int covered = 0;
  for (const FlashWorkItem& it : split.items) {
    if (it.kv_head == 0) covered += it.k_end - it.k_begin;
    EXPECT_GE(it.partial_offset, 0);
  }
  EXPECT_EQ(covered, 16384);
  EXPECT_EQ(split.merges.size(), 8u);
  EXPECT_GT(split.splits[0], 1);

  o.num_threads = 2;  // 8 head-packed items (one per request) feed 2 threads 4 each
  const std::vector<int32_t> qsl8{0, 1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<int32_t> lens8(8, 4096);
  const FlashPlan no_split = make_flash_plan(qsl8, lens8, 32, 8, 128, 128, MaskRule{}, o);
  EXPECT_TRUE(no_split.merges.empty());
  EXPECT_EQ(no_split.items.size(), 8u);
}

TEST(CpuFlashPlan, DecodeItemsPackEveryKvHeadPrefillItemsOne) {
  // Decode tiles (4 rows per KV head) take all 8 KV heads; prefill tiles of 32 rows one.
  const std::vector<int32_t> qsl{0, 1, 65};
  const std::vector<int32_t> lens{300, 64};
  FlashPlanOptions o;
  o.num_threads = 1;
  const FlashPlan plan = make_flash_plan(qsl, lens, 32, 8, 128, 128, MaskRule{}, o);
  std::vector<int> covered(2 * 8, 0);  // (request, KV head) -> query tokens covered
  for (const FlashWorkItem& it : plan.items) {
    EXPECT_EQ(it.num_kv_heads, it.seq == 0 ? 8 : 1);
    for (int h = it.kv_head; h < it.kv_head + it.num_kv_heads; ++h)
      covered[static_cast<size_t>(it.seq * 8 + h)] += it.q_end - it.q_begin;
  }
  for (int h = 0; h < 8; ++h) {
    EXPECT_EQ(covered[static_cast<size_t>(h)], 1);
    EXPECT_EQ(covered[static_cast<size_t>(8 + h)], 64);
  }
  EXPECT_EQ(plan.max_rows, 32);
  // Packing off: one item per KV head.
  o.max_packed_head_rows = 0;
  const FlashPlan unpacked = make_flash_plan(qsl, lens, 32, 8, 128, 128, MaskRule{}, o);
  for (const FlashWorkItem& it : unpacked.items) EXPECT_EQ(it.num_kv_heads, 1);
}

TEST(CpuFlashPlan, CausalPrefillTilesSkipKeysPastTheirLastQuery) {
  const std::vector<int32_t> qsl{0, 64};
  const std::vector<int32_t> lens{64};
  FlashPlanOptions o;
  o.num_threads = 1;
  o.rows_per_tile = 16;  // 4 tokens x 4 heads per tile
  const FlashPlan plan = make_flash_plan(qsl, lens, 4, 1, 64, 64, MaskRule{}, o);
  ASSERT_EQ(plan.items.size(), 16u);
  for (const FlashWorkItem& it : plan.items) {
    EXPECT_EQ(it.k_begin, 0);
    EXPECT_EQ(it.k_end, it.q_end);  // keys up to the tile's last query only
  }
  MaskRule window{.causal = true, .sliding_window = 8};
  const FlashPlan windowed = make_flash_plan(qsl, lens, 4, 1, 64, 64, window, o);
  for (const FlashWorkItem& it : windowed.items) {
    EXPECT_EQ(it.k_begin, std::max(0, it.q_begin - 7));
  }
}

TEST(CpuIsa, ForcingAnUnknownOrUnrunnableTargetIsAnError) {
  EXPECT_THROW(parse_cpu_isa("sse9"), Error);
  try {
    parse_cpu_isa("sse9");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("avx2, avx512, scalar"), std::string::npos);
  }
  for (CpuIsa isa : runnable_cpu_isas()) {
    set_cpu_isa_override(isa);
    EXPECT_EQ(active_cpu_isa(), isa);
  }
  set_cpu_isa_override(std::nullopt);
  EXPECT_EQ(active_cpu_isa(), runnable_cpu_isas().back());
}

}  // namespace
}  // namespace attnkit::cpu
