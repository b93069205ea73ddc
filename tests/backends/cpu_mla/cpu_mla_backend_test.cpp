// CPU_MLA against REFERENCE on fresh random inputs: every declared q dtype and latent-cache
// dtype, every SIMD target this machine runs, prefill/chunk/decode rows mixed in one batch,
// split-KV decode over long contexts, the sliding window, several block sizes; plus the
// declared capabilities, selection and the error paths.
//
// Tolerances (absolute, outputs are softmax averages of values in [-1, 1]):
//   fp32 q/out: 2e-5 (fp32 vs double accumulation over <= 1500 keys);
//   fp16 out: 2e-3; bf16 out: 1e-2 (one rounding of the output, |out| < 1).
// fp8 caches hold identical bytes in both backends (same quantisation), so the same bounds
// apply to the dequantised result.

#include "backends/cpu_mla/cpu_mla_backend.h"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "attnkit/core/error.h"
#include "attnkit/core/numeric.h"
#include "attnkit/kernels/cpu_isa.h"
#include "backends/cpu_mla/cpu_mla_impl.h"
#include "backends/reference/reference_backend.h"
#include "backends/reference/reference_kernels.h"
#include "cli/cli_runner.h"
#include "mla_case.h"

namespace attnkit::testing {
namespace {

float tolerance(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
      return 2e-3f;
    case DType::kBFloat16:
      return 1e-2f;
    default:
      return 2e-5f;
  }
}

void expect_matches_reference(const MlaCase& c, const std::string& what) {
  const auto mla = make_cpu_mla_backend();
  const auto ref = make_reference_backend();
  const std::vector<float> want = run_mla_case(*ref, c);
  const float tol = tolerance(c.dtype);
  // The avx512 target twice where the machine has AMX: its tile kernels and without them.
  std::vector<std::pair<cpu::CpuIsa, bool>> runs;
  for (cpu::CpuIsa isa : cpu::runnable_cpu_isas()) {
    runs.emplace_back(isa, false);
    if (isa == cpu::CpuIsa::kAvx512 && cpu::amx_bf16_available()) runs.emplace_back(isa, true);
  }
  for (const auto& [isa, amx] : runs) {
    cpu::set_cpu_isa_override(isa);
    cpu::set_cpu_amx_override(amx);
    const std::vector<float> got = run_mla_case(*mla, c);
    cpu::set_cpu_isa_override(std::nullopt);
    cpu::set_cpu_amx_override(std::nullopt);
    ASSERT_EQ(got.size(), want.size());
    double worst = 0;
    size_t worst_at = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const double err = std::abs(double{got[i]} - double{want[i]});
      if (!(err <= worst)) {  // also catches NaN
        worst = std::isnan(err) ? INFINITY : err;
        worst_at = i;
      }
    }
    EXPECT_LE(worst, tol) << what << " isa " << cpu::to_string(isa) << (amx ? " + amx" : "")
                          << " at element " << worst_at << ": got " << got[worst_at] << " want "
                          << want[worst_at];
  }
}

MlaCase mixed_batch() {
  MlaCase c;
  c.requests = {{37, 37}, {5, 300}, {1, 700}, {1, 1}, {3, 20}};
  return c;
}

TEST(CpuMla, MixedBatchMatchesReferenceForEveryDtype) {
  struct Combo {
    DType dtype;
    KvCacheDType kv;
    float k_scale;
  };
  const Combo combos[] = {
      {DType::kFloat32, KvCacheDType::kFloat32, 1.0f},
      {DType::kFloat32, KvCacheDType::kBFloat16, 1.0f},
      {DType::kBFloat16, KvCacheDType::kBFloat16, 1.0f},
      {DType::kFloat16, KvCacheDType::kFloat16, 1.0f},
      {DType::kFloat32, KvCacheDType::kFp8E4M3, 0.5f},
      {DType::kBFloat16, KvCacheDType::kFp8E4M3, 0.02f},
      {DType::kFloat32, KvCacheDType::kFp8E5M2, 2.0f},
  };
  uint64_t seed = 10;
  for (const Combo& combo : combos) {
    MlaCase c = mixed_batch();
    c.dtype = combo.dtype;
    c.kv_dtype = combo.kv;
    c.k_scale = combo.k_scale;
    c.seed = ++seed;
    expect_matches_reference(
        c, std::string(to_string(combo.dtype)) + " kv " + std::string(to_string(combo.kv)));
  }
}

TEST(CpuMla, SplitKvDecodeOfFewLongRequestsMatchesReference) {
  MlaCase c;
  c.requests = {{1, 1500}, {1, 600}};
  c.num_heads = 128;
  c.dtype = DType::kBFloat16;
  c.kv_dtype = KvCacheDType::kBFloat16;
  c.block_size = 64;
  c.seed = 77;
  expect_matches_reference(c, "decode 128 heads");

  // The plan really split the long keys (2 requests are fewer than 2 x threads).
  const cpu_mla::MlaPlan plan =
      cpu_mla::make_mla_plan(std::vector<int32_t>{0, 1, 2}, std::vector<int32_t>{3000, 1500}, 128,
                             MaskRule{}, {.threads = 2});
  EXPECT_GT(plan.items.size(), 2u);
  EXPECT_GT(plan.partial_rows, 0);
}

// The split-KV partial results are sized by build(), which the engine runs once per step,
// so forward() neither allocates nor page-faults them; a later smaller step keeps the
// buffer (it only grows).
TEST(CpuMla, BuildSizesTheSplitPartialsForForward) {
  const auto mla = make_cpu_mla_backend();
  MlaCase c;
  c.num_heads = 16;
  const AttentionLayerParams layer = mla_layer(c);
  auto builder = mla->make_builder(KvCacheSpec{}, layer);
  auto one_request = [](int seq_len) {
    CommonAttentionMetadata common;
    common.num_reqs = 1;
    common.num_actual_tokens = 1;
    common.query_start_loc = {0, 1};
    common.seq_lens = {seq_len};
    common.block_size = 64;
    common.max_blocks_per_req = (seq_len + 63) / 64;
    for (int b = 0; b < common.max_blocks_per_req; ++b) common.block_table.push_back(b);
    common.slot_mapping = {seq_len - 1};
    return common;
  };
  const CommonAttentionMetadata long_step = one_request(4096);
  const auto& meta = dynamic_cast<const cpu_mla::CpuMlaMetadata&>(builder->build(long_step));
  const int64_t rows = meta.plan().partial_rows;
  ASSERT_GT(rows, 0) << "a one-request step of 4096 keys is split across threads";
  EXPECT_GE(static_cast<int64_t>(meta.workspace().partial_out.size()), rows * kLora);
  EXPECT_GE(static_cast<int64_t>(meta.workspace().partial_ml.size()), 2 * rows);
  const float* partials = meta.workspace().partial_out.data();

  const CommonAttentionMetadata short_step = one_request(1024);
  const auto& again = dynamic_cast<const cpu_mla::CpuMlaMetadata&>(builder->build(short_step));
  EXPECT_GT(again.plan().partial_rows, 0);
  EXPECT_EQ(again.workspace().partial_out.data(), partials);
}

// Kernel-level parameters of the 5-request batch the split and AMX tests share (qsl, seq):
// latent rows of kLatent in pages of `block`, `max_blocks` table entries per request.
PagedAttentionParams kernel_params(const std::vector<int32_t>& qsl, const std::vector<int32_t>& seq,
                                   const std::vector<int32_t>& table, int heads, int block,
                                   int max_blocks) {
  PagedAttentionParams p;
  p.q_token_stride = int64_t{heads} * kLatent;
  p.q_head_stride = kLatent;
  p.o_token_stride = int64_t{heads} * kLora;
  p.o_head_stride = kLora;
  p.k_block_stride = p.v_block_stride = int64_t{block} * kLatent;
  p.k_token_stride = p.v_token_stride = kLatent;
  p.num_seqs = static_cast<int>(seq.size());
  p.query_start_loc = qsl.data();
  p.seq_lens = seq.data();
  p.block_table = table.data();
  p.block_table_stride = max_blocks;
  p.block_size = block;
  p.num_heads = heads;
  p.num_kv_heads = 1;
  p.head_size = kLatent;
  p.head_size_v = kLora;
  p.scale = 0.07f;
  return p;
}

TEST(CpuMla, ForcedSplitsOfEveryTileMatchTheReferenceKernel) {
  // Kernel level: every tile (prefill ones too, whose rows see no key in some chunks) cut
  // into 5 chunks and merged by log-sum-exp, against the reference kernel, fp32 throughout.
  const std::vector<int32_t> qsl{0, 37, 42, 43, 44, 47};
  const std::vector<int32_t> seq{37, 300, 700, 1, 20};
  const int heads = 16, block = 16, max_blocks = 44;
  std::mt19937_64 gen(9);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> q(static_cast<size_t>(47) * heads * kLatent);
  std::vector<float> latent(static_cast<size_t>(5) * max_blocks * block * kLatent);
  for (float& x : q) x = dist(gen);
  for (float& x : latent) x = dist(gen);
  std::vector<int32_t> table(static_cast<size_t>(5) * max_blocks);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(table.size() - 1 - i);
  std::vector<float> want(static_cast<size_t>(47) * heads * kLora);
  std::vector<float> got(want.size());
  PagedAttentionParams p = kernel_params(qsl, seq, table, heads, block, max_blocks);
  p.q = q.data();
  p.k_cache = p.v_cache = latent.data();
  for (int window : {0, 90}) {
    p.sliding_window = window;
    p.out = want.data();
    reference_paged_attention(p);
    const cpu_mla::MlaPlan plan =
        cpu_mla::make_mla_plan(qsl, seq, heads, mask_rule(p), {.force_splits = 5});
    int split_items = 0;
    for (const cpu_mla::MlaWorkItem& item : plan.items) split_items += item.num_splits > 1;
    EXPECT_GT(split_items, 20);
    for (cpu::CpuIsa isa : cpu::runnable_cpu_isas()) {
      std::fill(got.begin(), got.end(), NAN);
      p.out = got.data();
      cpu_mla::MlaWorkspace ws;
      cpu_mla::mla_attention(p, plan, ws, isa);
      double worst = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        const double err = std::abs(double{got[i]} - double{want[i]});
        worst = std::isnan(err) ? INFINITY : std::max(worst, err);
      }
      EXPECT_LE(worst, 2e-5) << "window " << window << " isa " << cpu::to_string(isa);
    }
  }
}

// The AMX tile kernels at kernel level (bf16 queries and cache, bf16 output) against the
// reference kernel over the same bf16-rounded inputs held in fp32 (so the oracle has no
// output rounding): head counts that fill no, one, a partial and eight 16-row groups; page
// sizes that let a 16-key tile load its rows straight from a page (16, 64) and ones that
// force the staging copy (1, 5); the planner's splits and every tile forced into 5 chunks
// (chunks start anywhere, so steps start before their first key); a sliding window whose
// pages before the window are "freed" (NaN) and must not be read.
// Tolerance: |got - want| <= 4e-3 + 8e-3 |want|: the output's bf16 rounding (2^-9
// relative) plus the bf16 rounding of each probability, which averages out over the keys;
// observed at most 3.0e-3 here, on rows of few keys (|out| near 1). A key dropped from or added to
// a row moves that row by about |v| / keys, 2e-3 to 5e-2 at these lengths, so the per-row relative
// L2 error is checked too (<= 1e-2; observed at most 3.0e-3).
TEST(CpuMla, AmxTilesMatchTheReferenceKernel) {
  if (!cpu::amx_bf16_available()) {
    GTEST_SKIP() << "this machine cannot run AMX-BF16 tile kernels (CPU or OS)";
  }
  const std::vector<int32_t> qsl{0, 37, 42, 43, 44, 47};
  const std::vector<int32_t> seq{37, 300, 700, 1, 20};
  const int tokens = 47, max_len = 700;
  std::mt19937_64 gen(2024);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int heads : {1, 16, 20, 128}) {
    for (int block : {1, 5, 16, 64}) {
      const int max_blocks = (max_len + block - 1) / block;
      // bf16 inputs, and the same values in fp32 for the oracle.
      std::vector<uint16_t> q16(static_cast<size_t>(tokens) * heads * kLatent);
      // One page more than the requests use: the "freed" page, all NaN (see the window).
      const size_t page = static_cast<size_t>(block) * kLatent;
      std::vector<uint16_t> latent16((static_cast<size_t>(5) * max_blocks + 1) * page);
      std::vector<float> q32(q16.size()), latent32(latent16.size());
      for (size_t i = 0; i < q16.size(); ++i) {
        q16[i] = float_to_bf16_bits(dist(gen));
        q32[i] = bf16_bits_to_float(q16[i]);
      }
      for (size_t i = 0; i < latent16.size(); ++i) {
        latent16[i] = i < latent16.size() - page ? float_to_bf16_bits(dist(gen)) : uint16_t{0x7fc0};
        latent32[i] = bf16_bits_to_float(latent16[i]);
      }
      const auto freed_page = static_cast<int32_t>(5 * max_blocks);
      std::vector<int32_t> table(static_cast<size_t>(5) * max_blocks);
      for (size_t i = 0; i < table.size(); ++i) {
        table[i] = static_cast<int32_t>(table.size() - 1 - i);  // pages in reverse order
      }
      const size_t out_size = static_cast<size_t>(tokens) * heads * kLora;
      std::vector<float> want(out_size);
      std::vector<uint16_t> got(out_size);
      PagedAttentionParams p = kernel_params(qsl, seq, table, heads, block, max_blocks);
      for (int window : {0, 90}) {
        p.sliding_window = window;
        if (window > 0) {
          // Pages wholly before every query's window may have been freed (an engine hands
          // them to other requests): they point at the NaN page, which must not be read.
          for (int r = 0; r < 5; ++r) {
            const int first_visible = std::max(0, seq[r] - (qsl[r + 1] - qsl[r]) - window + 1);
            for (int b = 0; (b + 1) * block <= first_visible; ++b) {
              table[static_cast<size_t>(r) * max_blocks + b] = freed_page;
            }
          }
        }
        p.q = q32.data();
        p.k_cache = p.v_cache = latent32.data();
        p.out = want.data();
        p.q_dtype = p.kv_dtype = ScalarType::kFloat32;
        reference_paged_attention(p);
        p.q = q16.data();
        p.k_cache = p.v_cache = latent16.data();
        p.out = got.data();
        p.q_dtype = p.kv_dtype = ScalarType::kBFloat16;
        for (int splits : {0, 5}) {
          const cpu_mla::MlaPlan plan =
              cpu_mla::make_mla_plan(qsl, seq, heads, mask_rule(p), {.force_splits = splits});
          std::fill(got.begin(), got.end(),
                    uint16_t{0xffff});  // NaN: every element must be written
          cpu_mla::MlaWorkspace ws;
          cpu::set_cpu_amx_override(true);
          cpu_mla::mla_attention(p, plan, ws, cpu::CpuIsa::kAvx512);
          cpu::set_cpu_amx_override(std::nullopt);
          const std::string what = std::to_string(heads) + " heads, page " + std::to_string(block) +
                                   ", window " + std::to_string(window) + ", splits " +
                                   std::to_string(splits);
          double worst = 0, worst_row = 0;
          for (size_t row = 0; row < out_size / kLora; ++row) {
            double diff2 = 0, norm2 = 0;
            for (size_t i = row * kLora; i < (row + 1) * kLora; ++i) {
              const double g = bf16_bits_to_float(got[i]), w = want[i];
              const double err = std::abs(g - w);
              if (!(err <= 4e-3 + 8e-3 * std::abs(w))) {  // also catches NaN
                ADD_FAILURE() << what << ": element " << i << " got " << g << " want " << w;
                return;
              }
              worst = std::max(worst, err);
              diff2 += (g - w) * (g - w);
              norm2 += w * w;
            }
            const double rel = norm2 > 0 ? std::sqrt(diff2 / norm2) : std::sqrt(diff2);
            worst_row = std::max(worst_row, rel);
          }
          EXPECT_LE(worst_row, 1e-2) << what;
          if (::testing::Test::HasFailure()) return;
          RecordProperty(what, std::to_string(worst) + " / " + std::to_string(worst_row));
        }
      }
    }
  }
}

// ATTNKIT_CPU_AMX: a bad value, or "on" where the machine cannot run the tile kernels, is an
// error that names it, from the library and through the CLI; where it can, both settings run
// a model end to end within --verify's tolerance.
TEST(CpuMla, TheAmxSwitchRefusesWhatTheMachineCannotRun) {
  if (cpu::amx_bf16_available()) {
    EXPECT_NO_THROW(cpu::set_cpu_amx_override(true));
    EXPECT_TRUE(cpu::amx_bf16_enabled());
  } else {
    try {
      cpu::set_cpu_amx_override(true);
      ADD_FAILURE() << "forcing AMX on without AMX did not throw";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
      EXPECT_NE(std::string(e.what()).find("AMX"), std::string::npos) << e.what();
    }
  }
  cpu::set_cpu_amx_override(false);
  EXPECT_FALSE(cpu::amx_bf16_enabled());
  cpu::set_cpu_amx_override(std::nullopt);

  const std::string run =
      "run --model deepseek-v2-lite --requests 2 --prompt-len 20 --output-len 3 "
      "--max-layers-per-kind 1 --verify --dtype bfloat16 --kv-cache-dtype bfloat16 "
      "--attention-config '{\"backend\":\"CPU_MLA\"}'";
  CliResult r = run_cli(run, "ATTNKIT_CPU_AMX=maybe");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("ATTNKIT_CPU_AMX=maybe"), std::string::npos) << r.err;
  r = run_cli(run, "ATTNKIT_CPU_AMX=off");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  r = run_cli(run, "ATTNKIT_CPU_AMX=on");
  if (cpu::amx_bf16_available()) {
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  } else {
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.err.find("ATTNKIT_CPU_AMX"), std::string::npos) << r.err;
  }
}

TEST(CpuMla, SlidingWindowMatchesReference) {
  for (int window : {1, 50, 257}) {
    MlaCase c;
    c.requests = {{40, 40}, {1, 600}, {7, 333}};
    c.sliding_window = window;
    c.dtype = DType::kBFloat16;
    c.kv_dtype = KvCacheDType::kBFloat16;
    c.seed = static_cast<uint64_t>(window);
    expect_matches_reference(c, "window " + std::to_string(window));
  }
}

// The kernel works on blocks of 4 query rows (tokens x heads); head counts that leave a
// partial block (1, 3, 6 rows per token) take its padded path in the scores and values.
TEST(CpuMla, HeadCountsThatLeaveAPartialRowBlockMatchReference) {
  for (int heads : {1, 3, 6}) {
    for (DType dtype : {DType::kFloat32, DType::kBFloat16}) {
      MlaCase c;
      c.requests = {{1, 300}, {5, 70}, {1, 1}, {2, 45}};
      c.num_heads = heads;
      c.dtype = dtype;
      c.kv_dtype = dtype == DType::kFloat32 ? KvCacheDType::kFloat32 : KvCacheDType::kBFloat16;
      c.seed = static_cast<uint64_t>(heads) * 7 + 3;
      expect_matches_reference(c,
                               std::to_string(heads) + " heads " + std::string(to_string(dtype)));
    }
  }
}

TEST(CpuMla, BlockSizesMatchReference) {
  for (int block : {1, 7, 64}) {
    MlaCase c;
    c.requests = {{9, 130}, {1, 65}};
    c.block_size = block;
    c.num_heads = 8;
    c.seed = static_cast<uint64_t>(block) + 100;
    expect_matches_reference(c, "block " + std::to_string(block));
  }
}

TEST(CpuMla, DeclaresExactlyWhatItRuns) {
  const auto mla = make_cpu_mla_backend();
  const BackendCapabilities& caps = mla->capabilities();
  EXPECT_TRUE(caps.mla);
  EXPECT_TRUE(caps.mla_only);
  EXPECT_TRUE(caps.head_sizes.allows(576));
  EXPECT_FALSE(caps.head_sizes.allows(512));
  EXPECT_TRUE(caps.sliding_window);
  EXPECT_FALSE(caps.sinks || caps.soft_cap || caps.chunked_local || caps.non_causal);

  SelectorConfig config;
  config.head_size = 576;
  config.head_size_v = 512;
  config.num_heads = 16;
  config.num_kv_heads = 1;
  config.use_mla = true;
  config.mla_rope_dim = 64;
  config.kv_cache_dtype = KvCacheDType::kFp8E4M3;
  EXPECT_TRUE(mla->validate(config, cpu_platform()).empty());
  config.sliding_window = 4096;
  EXPECT_TRUE(mla->validate(config, cpu_platform()).empty());

  SelectorConfig wrong_v = config;
  wrong_v.head_size_v = 448;
  EXPECT_FALSE(mla->validate(wrong_v, cpu_platform()).empty());
  SelectorConfig not_mla;
  not_mla.head_size = 128;
  not_mla.head_size_v = 128;
  EXPECT_FALSE(mla->validate(not_mla, cpu_platform()).empty());
  SelectorConfig sinks = config;
  sinks.has_sinks = true;
  EXPECT_FALSE(mla->validate(sinks, cpu_platform()).empty());
}

TEST(CpuMla, RejectsLayersItCannotRun) {
  const auto mla = make_cpu_mla_backend();
  MlaCase c = mixed_batch();
  AttentionLayerParams layer = mla_layer(c);
  layer.use_mla = false;
  try {
    mla->make_impl(layer);
    FAIL() << "non-MLA layer accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("MLA"), std::string::npos);
  }
  layer = mla_layer(c);
  layer.head_size_v = 256;
  EXPECT_THROW(mla->make_impl(layer), Error);
  layer = mla_layer(c);
  layer.soft_cap = 30.0f;
  EXPECT_THROW(mla->make_impl(layer), Error);
}

TEST(CpuMla, RejectsBadTensorsAndMetadata) {
  const auto mla = make_cpu_mla_backend();
  MlaCase c;
  const AttentionLayerParams layer = mla_layer(c);
  auto builder = mla->make_builder(KvCacheSpec{}, layer);
  auto impl = mla->make_impl(layer);
  HostTensor cache_key(ScalarType::kFloat32, {2, 16, 1, kLatent});
  KvCacheTensors cache;
  cache.key = cache_key.view();
  cache.block_size = 16;
  CommonAttentionMetadata common;
  common.num_reqs = 1;
  common.num_actual_tokens = 1;
  common.query_start_loc = {0, 1};
  common.seq_lens = {5};
  common.block_table = {1};
  common.max_blocks_per_req = 1;
  common.block_size = 16;
  common.slot_mapping = {20};
  HostTensor query(ScalarType::kFloat32, {1, 16, kLatent});
  HostTensor key(ScalarType::kFloat32, {1, 1, kLatent});
  HostTensor out(ScalarType::kFloat32, {1, 16, kLora});
  HostTensor bad_query(ScalarType::kBFloat16, {1, 16, kLatent});
  // Fresh random inputs: the good call must not read memory nothing wrote.
  std::mt19937 gen(11);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (HostTensor* t : {&query, &key, &cache_key}) {
    auto* data = static_cast<float*>(t->data());
    for (int64_t i = 0; i < t->view().numel(); ++i) data[i] = dist(gen);
  }
  const AttentionMetadata& meta = builder->build(common);
  auto message = [&](const TensorView& q, const KvCacheTensors& kv) {
    try {
      impl->forward(q, key.view(), TensorView{}, kv, meta, out.view());
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(message(bad_query.view(), cache).find("bfloat16"), std::string::npos);
  HostTensor small_cache(ScalarType::kFloat32, {1, 16, 1, kLatent});
  KvCacheTensors small = cache;
  small.key = small_cache.view();
  EXPECT_NE(message(query.view(), small).find("outside the cache"), std::string::npos);
  HostTensor wrong_width(ScalarType::kFloat32, {2, 16, 1, 512});
  KvCacheTensors narrow = cache;
  narrow.key = wrong_width.view();
  EXPECT_NE(message(query.view(), narrow).find("576"), std::string::npos);
  EXPECT_EQ(message(query.view(), cache), "");  // the good call runs

  CommonAttentionMetadata too_many = common;
  too_many.seq_lens = {0};
  EXPECT_THROW(builder->build(too_many), Error);
}

}  // namespace
}  // namespace attnkit::testing
