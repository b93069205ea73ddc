// Per-phase choices: prefill_backend / decode_backend, globally and per kind, and the
// composite backend that pairs the two over one KV cache.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "attnkit/backend/composite_backend.h"
#include "attnkit/selector/selection_report.h"
#include "attnkit/selector/selector.h"
#include "test_registry.h"

namespace attnkit {
namespace {

using testing::cpu;
using testing::decoder;
using testing::error_message;
using ::testing::HasSubstr;

class PhaseSelectionTest : public ::testing::Test {
 protected:
  PhaseSelectionTest() { testing::register_fake_builtins(registry_); }
  AttentionConfig config(std::string_view json) { return parse_attention_config(json, registry_); }
  Selector selector(std::string_view json) { return Selector(config(json), registry_); }
  // A CPU backend that serves any decoder layer, with a layout and kernel block sizes.
  void add_cpu_backend(std::string_view name, std::optional<KvLayout> layout,
                       SizeRule blocks = SizeRule::any()) {
    BackendCapabilities caps = testing::full_caps();
    caps.required_layout = layout;
    caps.kernel_block_sizes = std::move(blocks);
    registry_.register_backend(name, testing::fake_factory(std::string(name), caps));
  }

  BackendRegistry registry_{BackendRegistry::Contents::kEmpty};
};

const CandidateReport* find_candidate(const SelectionResult& r, std::string_view backend,
                                      std::optional<Phase> phase) {
  for (const CandidateReport& c : r.candidates) {
    if (c.backend == backend && c.phase == phase) return &c;
  }
  return nullptr;
}

TEST(AttentionConfigPhases, GlobalAndPerKindPhaseKeysParse) {
  const AttentionConfig c = parse_attention_config(
      R"({"prefill_backend": "reference", "decode_backend": "cpu_flash",
          "backend_per_kind": {"sliding_window": {"decode_backend": "REFERENCE"},
                               "full_attention": "CPU_FLASH"}})");
  EXPECT_EQ(c.phase_backends.prefill, "REFERENCE");
  EXPECT_EQ(c.phase_backends.decode, "CPU_FLASH");
  ASSERT_EQ(c.phase_backends_per_kind.count(KvCacheKind::kSlidingWindow), 1u);
  EXPECT_EQ(c.phase_backends_per_kind.at(KvCacheKind::kSlidingWindow).decode, "REFERENCE");
  EXPECT_FALSE(c.phase_backends_per_kind.at(KvCacheKind::kSlidingWindow).prefill);
  EXPECT_EQ(c.backend_per_kind.at(KvCacheKind::kFullAttention), "CPU_FLASH");
  // The JSON form reads back to the same choices.
  const AttentionConfig back = parse_attention_config(to_json(c).dump());
  EXPECT_EQ(back.phase_backends, c.phase_backends);
  EXPECT_EQ(back.phase_backends_per_kind, c.phase_backends_per_kind);
  EXPECT_EQ(back.backend_per_kind, c.backend_per_kind);
}

TEST(AttentionConfigPhases, BadPhaseValuesNameTheValueAndTheValidOnes) {
  EXPECT_THAT(error_message([] { parse_attention_config(R"({"decode_backend": "FLASHY"})"); }),
              HasSubstr("Unknown attention backend: 'FLASHY'. Valid options are:"));
  EXPECT_EQ(error_message([] {
              parse_attention_config(
                  R"({"backend_per_kind": {"full_attention": {"decode": "REFERENCE"}}})");
            }),
            "Unknown key 'decode' in backend_per_kind['full_attention']. Valid keys are: "
            "decode_backend, prefill_backend");
  EXPECT_THAT(error_message([] {
                parse_attention_config(R"({"backend_per_kind": {"full_attention": {}}})");
              }),
              HasSubstr("backend_per_kind['full_attention'] is an empty object"));
  EXPECT_THAT(error_message([] { parse_attention_config(R"({"prefill_backend": 3})"); }),
              HasSubstr("'prefill_backend' must be a string, got number 3"));
}

TEST_F(PhaseSelectionTest, GlobalPhasesMakeAComposite) {
  const auto r = selector(R"({"prefill_backend": "REFERENCE", "decode_backend": "CPU_FLASH"})")
                     .select(decoder(128), cpu());
  EXPECT_EQ(r->backend, "prefill:REFERENCE|decode:CPU_FLASH");
  ASSERT_TRUE(r->phases);
  EXPECT_EQ(r->phases->prefill, "REFERENCE");
  EXPECT_EQ(r->phases->decode, "CPU_FLASH");
  EXPECT_EQ(r->chosen_by, ChosenBy::kGlobal);
  ASSERT_NE(r->chosen, nullptr);
  EXPECT_EQ(r->chosen->name(), r->backend);
  const CandidateReport* decode = find_candidate(*r, "CPU_FLASH", Phase::kDecode);
  ASSERT_NE(decode, nullptr);
  EXPECT_TRUE(decode->user_choice);
  // The text and JSON reports show the pair.
  EXPECT_THAT(to_text(*r), HasSubstr("prefill rows -> REFERENCE, decode rows -> CPU_FLASH"));
  EXPECT_THAT(to_text(*r), HasSubstr("[user choice, decode]"));
  const nlohmann::json j = to_json(*r);
  EXPECT_EQ(j["phases"]["prefill"], "REFERENCE");
  EXPECT_EQ(j["phases"]["decode"], "CPU_FLASH");
}

TEST_F(PhaseSelectionTest, TheSameBackendForBothPhasesIsNoComposite) {
  const auto r = selector(R"({"prefill_backend": "REFERENCE", "decode_backend": "REFERENCE"})")
                     .select(decoder(128), cpu());
  EXPECT_EQ(r->backend, "REFERENCE");
  EXPECT_FALSE(r->phases);
}

TEST_F(PhaseSelectionTest, PerKindObjectBeatsGlobalAndLeavesTheOtherPhaseToIt) {
  const Selector s = selector(
      R"({"backend": "CPU_FLASH",
          "backend_per_kind": {"sliding_window": {"decode_backend": "REFERENCE"}}})");
  SelectorConfig window = decoder(128);
  window.sliding_window = 64;
  const auto r = s.select(window, cpu());
  ASSERT_TRUE(r->phases);
  EXPECT_EQ(r->phases->prefill, "CPU_FLASH");  // the global backend
  EXPECT_EQ(r->phases->decode, "REFERENCE");
  EXPECT_EQ(r->chosen_by, ChosenBy::kPerKind);
  // Other kinds keep the global choice for both phases.
  EXPECT_EQ(s.select(decoder(128), cpu())->backend, "CPU_FLASH");
}

TEST_F(PhaseSelectionTest, PerKindNameBeatsGlobalPhases) {
  const auto r = selector(
                     R"({"decode_backend": "REFERENCE",
                         "backend_per_kind": {"full_attention": "CPU_FLASH"}})")
                     .select(decoder(128), cpu());
  EXPECT_EQ(r->backend, "CPU_FLASH");
  EXPECT_EQ(r->chosen_by, ChosenBy::kPerKind);
}

TEST_F(PhaseSelectionTest, AnAutomaticPhaseTakesTheFirstBackendThatPairs) {
  // HND_ONLY needs an HND cache; CPU_FLASH (first in the CPU walk) states no layout, so
  // it pairs, and the composite's cache is HND.
  add_cpu_backend("HND_ONLY", KvLayout::kHND);
  const auto r = selector(R"({"decode_backend": "HND_ONLY"})").select(decoder(128), cpu());
  ASSERT_TRUE(r->phases) << to_text(*r);
  EXPECT_EQ(r->phases->decode, "HND_ONLY");
  EXPECT_EQ(r->phases->prefill, "CPU_FLASH");
  EXPECT_EQ(r->chosen->kv_layout(), KvLayout::kHND);
  // With a decode backend whose kernel blocks CPU_FLASH (16 only) cannot share, the walk
  // goes on to REFERENCE and says why CPU_FLASH was passed over.
  add_cpu_backend("BLOCK32", std::nullopt, SizeRule::list({32}));
  const auto r2 = selector(R"({"decode_backend": "BLOCK32"})").select(decoder(128), cpu());
  ASSERT_TRUE(r2->phases) << to_text(*r2);
  EXPECT_EQ(r2->phases->prefill, "REFERENCE");
  const CandidateReport* flash = find_candidate(*r2, "CPU_FLASH", Phase::kPrefill);
  ASSERT_NE(flash, nullptr);
  ASSERT_FALSE(flash->valid());
  EXPECT_THAT(flash->reasons[0], HasSubstr("does not pair with decode backend BLOCK32: kernel "
                                           "block sizes do not agree"));
}

TEST_F(PhaseSelectionTest, DifferentKvLayoutsAreAReasonStrictOrPrefer) {
  add_cpu_backend("NHD_ONLY", KvLayout::kNHD);
  add_cpu_backend("HND_ONLY", KvLayout::kHND);
  const std::string message = error_message([&] {
    selector(R"({"prefill_backend": "NHD_ONLY", "decode_backend": "HND_ONLY"})")
        .select(decoder(128), cpu());
  });
  EXPECT_THAT(message, HasSubstr("Prefill backend NHD_ONLY and decode backend HND_ONLY"));
  EXPECT_THAT(message, HasSubstr("KV layouts differ: prefill backend NHD_ONLY reads NHD, decode "
                                 "backend HND_ONLY reads HND"));
  const auto r = selector(
                     R"({"prefill_backend": "NHD_ONLY", "decode_backend": "HND_ONLY",
                         "override_mode": "prefer"})")
                     .select(decoder(128), cpu());
  EXPECT_FALSE(r->phases);
  EXPECT_EQ(r->backend, "CPU_FLASH");
  EXPECT_EQ(r->chosen_by, ChosenBy::kAuto);
  ASSERT_EQ(r->warnings.size(), 1u);
  EXPECT_THAT(r->warnings[0], HasSubstr("falling back to automatic selection"));
}

TEST_F(PhaseSelectionTest, KernelBlockSizesMustAgreeAndServeTheUserBlockSize) {
  add_cpu_backend("BLOCK32", std::nullopt, SizeRule::list({32}));
  EXPECT_THAT(error_message([&] {
                selector(R"({"prefill_backend": "CPU_FLASH", "decode_backend": "BLOCK32"})")
                    .select(decoder(128), cpu());
              }),
              HasSubstr("kernel block sizes do not agree: prefill backend CPU_FLASH takes 16, "
                        "decode backend BLOCK32 takes 32"));
  add_cpu_backend("BLOCK8X", std::nullopt, SizeRule::multiple(8));
  SelectorConfig user_block = decoder(128);
  user_block.block_size = 64;  // BLOCK8X serves 64; CPU_FLASH serves it as 4 kernel blocks
  EXPECT_TRUE(selector(R"({"prefill_backend": "CPU_FLASH", "decode_backend": "BLOCK8X"})")
                  .select(user_block, cpu())
                  ->phases);
  user_block.block_size = 24;  // not a multiple of 16
  EXPECT_THAT(error_message([&] {
                selector(R"({"prefill_backend": "REFERENCE", "decode_backend": "CPU_FLASH"})")
                    .select(user_block, cpu());
              }),
              HasSubstr("Backend CPU_FLASH (decode rows, chosen by the attention config's "
                        "'decode_backend') cannot serve"));
}

TEST_F(PhaseSelectionTest, AnInvalidPhaseBackendNamesItsPhase) {
  SelectorConfig sinks = decoder(128);
  sinks.has_sinks = true;  // the fake CPU_FLASH has no sinks
  EXPECT_THAT(
      error_message([&] { selector(R"({"decode_backend": "CPU_FLASH"})").select(sinks, cpu()); }),
      HasSubstr("Backend CPU_FLASH (decode rows, chosen by the attention config's "
                "'decode_backend') cannot serve this full_attention layer"));
  const auto r = selector(R"({"decode_backend": "CPU_FLASH", "override_mode": "prefer"})")
                     .select(sinks, cpu());
  EXPECT_EQ(r->backend, "REFERENCE");
  EXPECT_FALSE(r->phases);
}

TEST_F(PhaseSelectionTest, CrossAttentionIsNotSplit) {
  SelectorConfig cross = decoder(64);
  cross.attn_type = AttentionType::kEncoderDecoder;
  add_cpu_backend("OTHER_REF", std::nullopt);
  EXPECT_THAT(error_message([&] {
                selector(R"({"prefill_backend": "REFERENCE", "decode_backend": "OTHER_REF"})")
                    .select(cross, cpu());
              }),
              HasSubstr("prefill and decode rows are split for decoder self-attention only"));
}

TEST(CompositeBackend, CapabilitiesAreTheIntersection) {
  BackendCapabilities a = testing::full_caps();
  a.head_sizes = SizeRule::list({64, 128, 256});
  a.kernel_block_sizes = SizeRule::multiple(16);
  a.dtypes = {DType::kFloat32, DType::kBFloat16};
  BackendCapabilities b = testing::full_caps();
  b.head_sizes = SizeRule::multiple(64, 64, 128);
  b.kernel_block_sizes = SizeRule::multiple(8, 8, 64);
  b.sinks = false;
  b.dtypes = {DType::kBFloat16, DType::kFloat16};
  const auto composite = make_composite_backend(std::make_shared<testing::FakeBackend>("A", a),
                                                std::make_shared<testing::FakeBackend>("B", b));
  const BackendCapabilities& c = composite->capabilities();
  EXPECT_EQ(c.head_sizes.enumerate(1, 512), (std::vector<int>{64, 128}));
  EXPECT_EQ(c.kernel_block_sizes.enumerate(1, 128), (std::vector<int>{16, 32, 48, 64}));
  EXPECT_EQ(c.dtypes, std::vector<DType>{DType::kBFloat16});
  EXPECT_FALSE(c.sinks);
  EXPECT_TRUE(c.sliding_window);
  EXPECT_EQ(c.attention_types, std::vector<AttentionType>{AttentionType::kDecoder});
  SelectorConfig layer = decoder(256);
  EXPECT_THAT(composite->validate(layer, cpu()),
              ::testing::Contains(HasSubstr("head_size 256 not supported")));
}

TEST(CompositeBackend, SplitPhasesNeedsDecodesFirst) {
  CommonAttentionMetadata m;
  m.num_reqs = 4;
  m.query_start_loc = {0, 1, 2, 7, 10};
  m.num_actual_tokens = 10;
  const PhaseSplit s = split_phases(m);
  EXPECT_EQ(s.num_decode_reqs, 2);
  EXPECT_EQ(s.num_decode_tokens, 2);
  EXPECT_EQ(s.num_prefill_reqs, 2);
  EXPECT_EQ(s.num_prefill_tokens, 8);
  m.query_start_loc = {0, 1, 6, 7, 10};
  EXPECT_EQ(error_message([&] { split_phases(m); }),
            "batch request 2 is a decode (query length 1) after prefill request 1 (query length "
            "5): a backend that splits prefill and decode rows needs every decode request (query "
            "length <= 1) first in the batch");
}

TEST(CompositeBackend, SliceRequestsRebasesEveryField) {
  CommonAttentionMetadata m;
  m.num_reqs = 3;
  m.query_start_loc = {0, 1, 4, 6};
  m.num_actual_tokens = 6;
  m.seq_lens = {9, 3, 20};
  m.max_blocks_per_req = 2;
  m.block_table = {1, 2, 3, 0, 4, 5};
  m.block_size = 16;
  m.slot_mapping = {40, 48, 49, 50, 70, 71};
  m.max_query_len = 3;
  m.max_seq_len = 20;
  m.null_block_id = 0;
  CommonAttentionMetadata out;
  slice_requests(m, 1, 2, out);
  EXPECT_EQ(out.num_reqs, 2);
  EXPECT_EQ(out.query_start_loc, (std::vector<int32_t>{0, 3, 5}));
  EXPECT_EQ(out.num_actual_tokens, 5);
  EXPECT_EQ(out.seq_lens, (std::vector<int32_t>{3, 20}));
  EXPECT_EQ(out.block_table, (std::vector<int32_t>{3, 0, 4, 5}));
  EXPECT_EQ(out.slot_mapping, (std::vector<int64_t>{48, 49, 50, 70, 71}));
  EXPECT_EQ(out.max_query_len, 3);
  EXPECT_EQ(out.max_seq_len, 20);
  EXPECT_EQ(out.block_size, 16);
  slice_requests(m, 0, 1, out);
  EXPECT_EQ(out.query_start_loc, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(out.slot_mapping, (std::vector<int64_t>{40}));
  EXPECT_EQ(out.max_query_len, 1);
  EXPECT_EQ(out.max_seq_len, 9);
}

}  // namespace
}  // namespace attnkit
