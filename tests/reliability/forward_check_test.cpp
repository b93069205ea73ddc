// Every input a caller can get wrong in forward() is rejected, before anything is written,
// with an Error naming the bad value, the same way by every CPU backend (the shared checks
// of backend/forward_check.h); the checked mode's extra checks are switchable.
#include "attnkit/backend/forward_check.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "reliability/paged_step.h"

namespace attnkit {
namespace {

using ::testing::HasSubstr;
using testing::PagedStep;

struct BadInput {
  const char* what;
  std::function<void(PagedStep&)> break_it;
  const char* message;  // a substring of the Error
};

// Inputs every layer can get wrong (standard and MLA layers alike).
std::vector<BadInput> common_bad_inputs() {
  return {
      {"query dtype", [](PagedStep& s) { s.query.dtype = ScalarType::kFloat16; },
       "query has dtype float16, expected float32"},
      {"query on a GPU", [](PagedStep& s) { s.query.device.type = DeviceType::kCuda; },
       "query must be in host memory"},
      {"query rank", [](PagedStep& s) { s.query.ndim = 2; }, "query must be [tokens, "},
      {"query heads", [](PagedStep& s) { s.query.shape[1] += 1; }, "query must be [tokens, "},
      {"query strided last dimension", [](PagedStep& s) { s.query.strides[2] = 2; },
       "query must be contiguous in its last dimension"},
      {"query rows", [](PagedStep& s) { s.query.shape[0] = 3; },
       "query has 3 rows, needs at least 4"},
      {"output head size", [](PagedStep& s) { s.output.shape[2] += 16; },
       "output must be [tokens, "},
      {"output rows", [](PagedStep& s) { s.output.shape[0] = 1; },
       "output has 1 rows, needs at least 4"},
      {"key rows", [](PagedStep& s) { s.key.shape[0] = 2; }, "key has 2 rows, needs at least 4"},
      {"key missing while slots are written", [](PagedStep& s) { s.key = TensorView{}; },
       "key/value are required for decoder layers: slot_mapping[0] = "},
      {"cache dtype", [](PagedStep& s) { s.cache.key.dtype = ScalarType::kBFloat16; },
       "key cache has dtype bfloat16, expected float32"},
      {"cache layout", [](PagedStep& s) { s.cache.layout = KvLayout::kHND; },
       "key cache must be HND [num_blocks, "},
      {"cache missing", [](PagedStep& s) { s.cache.key = TensorView{}; },
       "key cache is empty but the layer reads a paged KV cache"},
      {"cache block size", [](PagedStep& s) { s.cache.block_size = 8; },
       "cache block size 8 differs from the metadata's block size 4"},
      {"block id past the pool", [](PagedStep& s) { s.common.block_table[2] = 99; },
       "block_table[1][0] = 99 is outside the cache (0..7)"},
      {"negative block id", [](PagedStep& s) { s.common.block_table[1] = -1; },
       "block_table[0][1] = -1 is outside the cache (0..7)"},
      {"pool smaller than the table",
       [](PagedStep& s) {
         s.cache.key.shape[0] = 5;
         if (!s.cache.value.empty()) s.cache.value.shape[0] = 5;
       },
       "block_table[0][0] = 5 is outside the cache (0..4)"},
      {"slot past the pool", [](PagedStep& s) { s.common.slot_mapping[2] = 32; },
       "slot_mapping[2] = 32 is outside the cache (8 blocks of 4): valid slots are 0..31"},
      {"seq_len beyond the block table", [](PagedStep& s) { s.common.seq_lens[1] = 9; },
       "request 1 needs 3 blocks for 9 tokens but max_blocks_per_req is 2"},
      {"more new tokens than seq_len", [](PagedStep& s) { s.common.seq_lens[1] = 2; },
       "request 1 has 3 new tokens but seq_len 2"},
      {"negative seq_len", [](PagedStep& s) { s.common.seq_lens[2] = -1; },
       "seq_lens[2] = -1 is negative"},
      {"seq_lens size", [](PagedStep& s) { s.common.seq_lens.pop_back(); },
       "seq_lens has 2 entries, expected num_reqs = 3"},
      {"query_start_loc size", [](PagedStep& s) { s.common.query_start_loc.pop_back(); },
       "query_start_loc has 3 entries, expected num_reqs + 1 = 4"},
      {"query_start_loc start", [](PagedStep& s) { s.common.query_start_loc[0] = 1; },
       "query_start_loc[0] is 1, must be 0"},
      {"query_start_loc order", [](PagedStep& s) { s.common.query_start_loc[2] = 0; },
       "query_start_loc must be non-decreasing (entry 2 is 0 after 1)"},
      {"num_actual_tokens", [](PagedStep& s) { s.common.num_actual_tokens = 5; },
       "query_start_loc ends at 4 but num_actual_tokens is 5"},
      {"block_table size", [](PagedStep& s) { s.common.block_table.pop_back(); },
       "block_table has 5 entries, needs at least num_reqs * max_blocks_per_req = 6"},
      {"negative num_reqs", [](PagedStep& s) { s.common.num_reqs = -1; },
       "num_reqs -1 is negative"},
      {"non-positive block size",
       [](PagedStep& s) {
         s.common.block_size = 0;
         s.cache.block_size = 0;
       },
       "block_size 0 must be positive"},
  };
}

// Inputs only standard (non-MLA) layers have.
std::vector<BadInput> standard_bad_inputs() {
  return {
      {"key heads", [](PagedStep& s) { s.key.shape[1] = 3; }, "key must be [tokens, 2, 16]"},
      {"value missing", [](PagedStep& s) { s.value = TensorView{}; },
       "value is empty but key is not"},
      {"value head size", [](PagedStep& s) { s.value.shape[2] = 8; },
       "value must be [tokens, 2, 16]"},
      {"value cache blocks", [](PagedStep& s) { s.cache.value.shape[0] = 7; },
       "key and value caches differ in blocks (8 vs 7)"},
      {"value cache heads", [](PagedStep& s) { s.cache.value.shape[2] = 4; },
       "value cache must be NHD [num_blocks, 4, 2, 16]"},
  };
}

// Inputs only MLA layers have.
std::vector<BadInput> mla_bad_inputs() {
  return {
      {"latent width", [](PagedStep& s) { s.key.shape[2] = 512; }, "key must be [tokens, 1, 576]"},
      {"latent cache width", [](PagedStep& s) { s.cache.key.shape[3] = 512; },
       "key cache must be NHD [num_blocks, 4, 1, 576]"},
  };
}

void expect_rejected(const char* backend, bool mla, const std::vector<BadInput>& inputs) {
  for (const BadInput& bad : inputs) {
    SCOPED_TRACE(std::string(backend) + ": " + bad.what);
    PagedStep step(backend, mla);
    const std::vector<float> cache_before = [&] {
      std::vector<float> v(static_cast<size_t>(step.key_cache.view().numel()));
      for (size_t i = 0; i < v.size(); ++i) {
        v[i] = load_as_float(step.key_cache.data(), ScalarType::kFloat32, static_cast<int64_t>(i));
      }
      return v;
    }();
    const std::string message = step.error_after(bad.break_it);
    EXPECT_THAT(message, HasSubstr(bad.message));
    EXPECT_THAT(message, HasSubstr(std::string(backend) + ": "));
    // Rejected before anything was written.
    for (size_t i = 0; i < cache_before.size(); ++i) {
      ASSERT_EQ(load_as_float(step.key_cache.data(), ScalarType::kFloat32, static_cast<int64_t>(i)),
                cache_before[i])
          << "cache element " << i << " changed";
    }
  }
}

class StandardForwardCheck : public ::testing::TestWithParam<const char*> {};
class MlaForwardCheck : public ::testing::TestWithParam<const char*> {};

TEST_P(StandardForwardCheck, TheValidStepRuns) {
  PagedStep step(GetParam());
  EXPECT_EQ(step.error_after([](PagedStep&) {}), "");
}

TEST_P(StandardForwardCheck, EveryBadInputIsAnErrorNamingTheValue) {
  expect_rejected(GetParam(), false, common_bad_inputs());
  expect_rejected(GetParam(), false, standard_bad_inputs());
}

TEST_P(MlaForwardCheck, TheValidStepRunsWithA3dOr2dLatent) {
  PagedStep step(GetParam(), /*mla=*/true);
  EXPECT_EQ(step.error_after([](PagedStep&) {}), "");
  PagedStep flat(GetParam(), /*mla=*/true);
  EXPECT_EQ(flat.error_after([](PagedStep& s) {
    s.key.ndim = 2;
    s.key.shape[1] = 576;
    s.key.strides[1] = 1;
  }),
            "");
  EXPECT_EQ(flat.output_values(), step.output_values());
}

TEST_P(MlaForwardCheck, EveryBadInputIsAnErrorNamingTheValue) {
  expect_rejected(GetParam(), true, common_bad_inputs());
  expect_rejected(GetParam(), true, mla_bad_inputs());
}

INSTANTIATE_TEST_SUITE_P(CpuBackends, StandardForwardCheck,
                         ::testing::Values("REFERENCE", "CPU_FLASH"));
INSTANTIATE_TEST_SUITE_P(CpuBackends, MlaForwardCheck, ::testing::Values("REFERENCE", "CPU_MLA"));

// A key-less step is fine when it writes nothing (every slot negative = padding).
TEST_P(StandardForwardCheck, AKeylessStepThatWritesNothingRuns) {
  PagedStep step(GetParam());
  EXPECT_EQ(step.error_after([](PagedStep& s) {
    s.key = TensorView{};
    s.value = TensorView{};
    for (int64_t& slot : s.common.slot_mapping) slot = -1;
  }),
            "");
}

// The block table needs at least num_reqs * max_blocks_per_req entries: row i starts at
// i * max_blocks_per_req, so entries past the last row are never read, whatever they hold.
TEST_P(StandardForwardCheck, ABlockTableLargerThanItsRowsIsAcceptedAndNotRead) {
  PagedStep exact(GetParam());
  EXPECT_EQ(exact.error_after([](PagedStep&) {}), "");
  PagedStep larger(GetParam());
  larger.common.block_table.insert(larger.common.block_table.end(), {99, -1, 7});
  larger.layer.checked = true;
  EXPECT_EQ(larger.error_after([](PagedStep&) {}), "");
  EXPECT_EQ(larger.output_values(), exact.output_values());
}

TEST_P(MlaForwardCheck, ABlockTableLargerThanItsRowsIsAcceptedAndNotRead) {
  PagedStep exact(GetParam(), /*mla=*/true);
  EXPECT_EQ(exact.error_after([](PagedStep&) {}), "");
  PagedStep larger(GetParam(), /*mla=*/true);
  larger.common.block_table.insert(larger.common.block_table.end(), {99, -1});
  EXPECT_EQ(larger.error_after([](PagedStep&) {}), "");
  EXPECT_EQ(larger.output_values(), exact.output_values());
}

// The same rows as an encoder-only layer: each request's whole sequence is new (seq_len =
// its query rows), nothing is cached, no block table.
void make_encoder_only(PagedStep& s) {
  s.layer.attn_type = AttentionType::kEncoderOnly;
  s.common.seq_lens = {1, 3, 0};
  s.common.max_seq_len = 3;
  s.common.causal = false;
  s.common.slot_mapping.assign(PagedStep::kTokens, -1);
  s.common.block_table.clear();
  s.common.max_blocks_per_req = 0;
  s.common.block_size = 0;
  s.cache = KvCacheTensors{};
}

// Encoder-only layers have no cache, so their block-table fields are not read and not
// checked; a layer that reads the cache still rejects the same values.
TEST_P(StandardForwardCheck, EncoderOnlyLayersIgnoreTheBlockTableFields) {
  PagedStep clean(GetParam());
  make_encoder_only(clean);
  EXPECT_EQ(clean.error_after([](PagedStep&) {}), "");
  const std::vector<float> out = clean.output_values();
  EXPECT_TRUE(std::any_of(out.begin(), out.end(), [](float x) { return x != 0.0f; }));

  auto scramble = [](PagedStep& s) {
    s.common.max_blocks_per_req = -3;
    s.common.block_table = {42, -7};
    s.common.block_size = -1;
  };
  PagedStep scrambled(GetParam());
  make_encoder_only(scrambled);
  scramble(scrambled);
  EXPECT_EQ(scrambled.error_after([](PagedStep&) {}), "");
  EXPECT_EQ(scrambled.output_values(), out);

  PagedStep decoder(GetParam());
  scramble(decoder);
  EXPECT_THAT(decoder.error_after([](PagedStep&) {}),
              HasSubstr(std::string(GetParam()) + ": max_blocks_per_req -3 is negative"));
}

TEST_P(StandardForwardCheck, CheckedModeRejectsSlotsThatDisagreeWithTheBlockTable) {
  // Row 1 (request 1, position 4 in block_table[1][1] = 6) would overwrite request 0's
  // position 4 (block 2, slot 8): in bounds, so only checked mode can see it.
  auto misplace = [](PagedStep& s) { s.common.slot_mapping[1] = 8; };
  PagedStep checked(GetParam());
  checked.layer.checked = true;
  EXPECT_THAT(checked.error_after(misplace),
              HasSubstr("slot_mapping[1] = 8 disagrees with the block table: request 1 position "
                        "4 lies in block_table[1][1] = 6, slot 24"));
  PagedStep unchecked(GetParam());
  unchecked.layer.checked = false;
  EXPECT_EQ(unchecked.error_after(misplace), "");
}

TEST_P(StandardForwardCheck, CheckedModeRejectsTwoRowsWritingOneSlot) {
  auto twice = [](PagedStep& s) { s.common.slot_mapping[3] = s.common.slot_mapping[2]; };
  PagedStep checked(GetParam());
  checked.layer.checked = true;
  EXPECT_THAT(checked.error_after(twice),
              HasSubstr("slot_mapping[2] and slot_mapping[3] both write slot 25"));
  PagedStep unchecked(GetParam());
  unchecked.layer.checked = false;
  EXPECT_EQ(unchecked.error_after(twice), "");
}

TEST_P(StandardForwardCheck, InconsistentLayersAreRejectedAtCreation) {
  auto error_of = [&](auto change) -> std::string {
    PagedStep step(GetParam());
    change(step.layer);
    try {
      step.backend->make_impl(step.layer);
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  const std::string gqa = error_of([](AttentionLayerParams& l) { l.num_kv_heads = 3; });
  EXPECT_THAT(gqa, HasSubstr("num_heads 4"));
  EXPECT_THAT(gqa, HasSubstr("num_kv_heads 3"));
  EXPECT_THAT(error_of([](AttentionLayerParams& l) { l.sinks = {0.5f}; }),
              HasSubstr("sinks has 1 entries, expected num_heads"));
  EXPECT_THAT(error_of([](AttentionLayerParams& l) { l.sliding_window = -2; }),
              HasSubstr("sliding_window -2 is negative"));
  EXPECT_THAT(error_of([](AttentionLayerParams& l) { l.chunk_size = -8; }),
              HasSubstr("chunk_size -8 is negative"));
  EXPECT_THAT(error_of([](AttentionLayerParams& l) { l.soft_cap = -1.0f; }),
              HasSubstr("soft_cap -1 is negative"));
  EXPECT_THAT(error_of([](AttentionLayerParams& l) { l.num_heads = 0; }), HasSubstr("num_heads 0"));
}

TEST(CheckedMode, FollowsTheLayerThenTheEnvironmentThenTheBuild) {
  AttentionLayerParams layer;
  layer.checked = true;
  EXPECT_TRUE(checked_mode(layer));
  layer.checked = false;
  EXPECT_FALSE(checked_mode(layer));
  layer.checked.reset();
  bool expected = true;
#ifdef NDEBUG
  expected = false;
#endif
  if (const char* env = std::getenv("ATTNKIT_CHECKED"); env != nullptr && *env != '\0') {
    expected = std::string(env) == "1" || std::string(env) == "on" || std::string(env) == "true";
  }
  EXPECT_EQ(checked_mode(layer), expected);
  EXPECT_EQ(checked_mode_default(), expected);
}

TEST(CheckedMode, FindsNonFiniteRowsPerRequest) {
  HostTensor out(ScalarType::kFloat32, {4, 2, 3});
  for (int i = 0; i < 24; ++i) out.data_as<float>()[i] = 0.5f;
  out.data_as<float>()[2 * 6 + 1 * 3 + 2] = std::numeric_limits<float>::quiet_NaN();  // row 2
  out.data_as<float>()[3 * 6] = std::numeric_limits<float>::infinity();               // row 3
  CommonAttentionMetadata common;
  common.num_reqs = 3;
  common.query_start_loc = {0, 1, 4, 4};
  const auto rows = find_non_finite_rows(out.view(), common);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].request, 1);
  EXPECT_EQ(rows[0].first_row, 2);
  EXPECT_EQ(rows[0].num_rows, 2);
  EXPECT_EQ(rows[0].head, 1);
  EXPECT_EQ(rows[0].dim, 2);
  HostTensor half(ScalarType::kBFloat16, {4, 2, 3});
  for (int i = 0; i < 24; ++i) store_from_float(half.data(), ScalarType::kBFloat16, i, 1.0f);
  EXPECT_TRUE(find_non_finite_rows(half.view(), common).empty());
  store_from_float(half.data(), ScalarType::kBFloat16, 0, -std::numeric_limits<float>::infinity());
  ASSERT_EQ(find_non_finite_rows(half.view(), common).size(), 1u);
  EXPECT_EQ(find_non_finite_rows(half.view(), common)[0].request, 0);
}

}  // namespace
}  // namespace attnkit
