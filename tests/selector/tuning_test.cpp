// The tuned choice with a timer of known times: only valid backends are timed, the fastest
// wins, times are cached per device, version, binary, layer and bucket, reused when the key
// matches and ignored (with a note) when it does not.
#include "attnkit/selector/tuning.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "attnkit/selector/selection_report.h"
#include "attnkit/selector/selector.h"
#include "test_registry.h"

namespace attnkit {
namespace {

using testing::cpu;
using ::testing::ElementsAre;
using testing::error_message;
using ::testing::HasSubstr;
using ::testing::Not;

// Returns a fixed time per backend and counts what it was asked to time.
class FixedTimer final : public BackendTimer {
 public:
  explicit FixedTimer(std::map<std::string, double> us) : us_(std::move(us)) {}
  double median_forward_us(const AttentionBackend& backend, const SelectorConfig& /*layer*/,
                           const Platform& /*platform*/, const ShapeBucket& bucket,
                           int* repeats) override {
    calls.push_back(std::string(backend.name()) + " " + bucket.describe());
    *repeats = 3;
    return us_.at(std::string(backend.name())) * bucket.num_reqs;
  }
  std::vector<std::string> calls;

 private:
  std::map<std::string, double> us_;
};

SelectorConfig layer(int heads = 8, int kv_heads = 2) {
  SelectorConfig c = testing::decoder(128);
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  c.kv_cache_dtype = KvCacheDType::kBFloat16;
  return c;
}

const std::vector<ShapeBucket> kBuckets = {{Phase::kDecode, 2, 1, 256},
                                           {Phase::kPrefill, 1, 64, 64}};

class TuningTest : public ::testing::Test {
 protected:
  TuningTest() {
    testing::register_fake_builtins(registry_);
    path_ = (std::filesystem::temp_directory_path() /
             ("attnkit_tuning_" + std::to_string(::getpid()) + "_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".json"))
                .string();
    std::filesystem::remove(path_);
  }
  ~TuningTest() override { std::filesystem::remove(path_); }

  std::shared_ptr<const SelectionResult> select_tuned(std::shared_ptr<BackendTimer> timer,
                                                      const SelectorConfig& l = layer(),
                                                      const Platform& platform = cpu()) {
    const Selector selector(parse_attention_config(R"({"backend": "tuned"})", registry_), registry_,
                            std::make_shared<const Tuning>(path_, timer, kBuckets));
    return selector.select(l, platform);
  }

  BackendRegistry registry_{BackendRegistry::Contents::kEmpty};
  std::string path_;
};

TEST_F(TuningTest, TheFastestValidBackendWinsAndTheReportSaysWhy) {
  // REFERENCE measures faster than CPU_FLASH (first in priority): tuning overrides the order.
  auto timer = std::make_shared<FixedTimer>(
      std::map<std::string, double>{{"CPU_FLASH", 30.0}, {"REFERENCE", 10.0}});
  const auto r = select_tuned(timer);
  EXPECT_EQ(r->backend, "REFERENCE");
  EXPECT_EQ(r->chosen_by, ChosenBy::kTuned);
  EXPECT_EQ(r->requested, "tuned");
  ASSERT_TRUE(r->tuning);
  ASSERT_EQ(r->tuning->timings.size(), 2u);
  EXPECT_EQ(r->tuning->timings[0].backend, "REFERENCE");
  EXPECT_DOUBLE_EQ(r->tuning->timings[0].total_us, 10.0 * 2 + 10.0);  // b2 decode + b1 prefill
  EXPECT_DOUBLE_EQ(r->tuning->timings[1].total_us, 90.0);
  EXPECT_EQ(r->tuning->why,
            "REFERENCE is fastest: 30.0 us over 2 buckets against 90.0 us for CPU_FLASH (3.00x)");
  EXPECT_THAT(to_text(*r), HasSubstr("tuned: REFERENCE is fastest"));
  EXPECT_THAT(to_text(*r), HasSubstr("decode b2 q1 ctx256 20.0 us"));
  EXPECT_EQ(to_json(*r)["tuning"]["timings"][0]["backend"], "REFERENCE");
  EXPECT_EQ(timer->calls.size(), 4u);  // two backends, two buckets
}

TEST_F(TuningTest, OnlyBackendsThatPassValidateAreTimed) {
  auto timer = std::make_shared<FixedTimer>(
      std::map<std::string, double>{{"CPU_FLASH", 1.0}, {"REFERENCE", 10.0}});
  SelectorConfig capped = layer();
  capped.soft_cap = 30.0f;  // the fake CPU_FLASH has no soft-capping
  const auto r = select_tuned(timer, capped);
  EXPECT_EQ(r->backend, "REFERENCE");
  EXPECT_THAT(timer->calls,
              ElementsAre("REFERENCE decode b2 q1 ctx256", "REFERENCE prefill b1 q64 ctx64"));
  EXPECT_EQ(r->tuning->why, "REFERENCE is the only valid backend (30.0 us over 2 buckets)");
}

TEST_F(TuningTest, TimesAreCachedAndReusedByAReaderWithoutATimer) {
  auto timer = std::make_shared<FixedTimer>(
      std::map<std::string, double>{{"CPU_FLASH", 5.0}, {"REFERENCE", 10.0}});
  EXPECT_EQ(select_tuned(timer)->backend, "CPU_FLASH");
  ASSERT_TRUE(std::filesystem::exists(path_));
  const TuningCache cache = TuningCache::load(path_);
  ASSERT_EQ(cache.entries().size(), 4u);
  const TuningKey key = local_tuning_key(cpu());
  EXPECT_EQ(cache.entries()[0].key, key);
  EXPECT_THAT(key.device, HasSubstr("isa "));
  EXPECT_THAT(key.binary_hash, HasSubstr("fnv1a64:"));

  // A second selector measures nothing: every time is in the cache.
  auto second = std::make_shared<FixedTimer>(
      std::map<std::string, double>{{"CPU_FLASH", 50.0}, {"REFERENCE", 1.0}});
  const auto r = select_tuned(second);
  EXPECT_EQ(r->backend, "CPU_FLASH");
  EXPECT_TRUE(second->calls.empty());
  EXPECT_FALSE(r->tuning->timings[0].measured_now);
  // Nor does a reader (explain's Tuning has no timer).
  EXPECT_EQ(select_tuned(nullptr)->backend, "CPU_FLASH");
  // Another layer configuration is a key of its own: measured anew.
  select_tuned(second, layer(16, 16));
  EXPECT_EQ(second->calls.size(), 4u);
}

TEST_F(TuningTest, TimesOfAnotherBinaryAreIgnoredWithANote) {
  auto timer = std::make_shared<FixedTimer>(
      std::map<std::string, double>{{"CPU_FLASH", 5.0}, {"REFERENCE", 10.0}});
  select_tuned(timer);
  // Rewrite the cache as if another build of attnkit had measured it.
  nlohmann::json root = nlohmann::json::parse(std::ifstream(path_));
  for (nlohmann::json& e : root["entries"]) e["key"]["binary_hash"] = "fnv1a64:0000000000000000";
  std::ofstream(path_) << root.dump();

  const auto r = select_tuned(nullptr);
  EXPECT_EQ(r->backend, "CPU_FLASH");  // automatic selection stands
  EXPECT_EQ(r->chosen_by, ChosenBy::kAuto);
  EXPECT_THAT(r->tuning->why, HasSubstr("not every valid backend has a time for this device and "
                                        "binary"));
  EXPECT_THAT(r->tuning->notes,
              ::testing::Contains(HasSubstr("binary fnv1a64:0000000000000000, not this")));
  // With a timer the stale times are measured again under this key.
  auto again = std::make_shared<FixedTimer>(
      std::map<std::string, double>{{"CPU_FLASH", 50.0}, {"REFERENCE", 1.0}});
  EXPECT_EQ(select_tuned(again)->backend, "REFERENCE");
  EXPECT_EQ(again->calls.size(), 4u);
}

TEST_F(TuningTest, ADescribedPlatformIsNotTuned) {
  auto timer = std::make_shared<FixedTimer>(std::map<std::string, double>{});
  const auto r = select_tuned(timer, layer(), testing::cuda(9, 0));
  EXPECT_EQ(r->backend, "CUDA_FLASH");
  EXPECT_THAT(r->tuning->why, HasSubstr("cuda:9.0 is only described"));
  EXPECT_TRUE(timer->calls.empty());
}

TEST_F(TuningTest, AFileThatIsNotATuningCacheIsAnErrorNamingIt) {
  std::ofstream(path_) << R"({"entries": []})";
  EXPECT_THAT(error_message([&] { TuningCache::load(path_); }),
              HasSubstr(path_ + " is not an attnkit tuning cache"));
  std::ofstream(path_) << "{not json";
  EXPECT_THAT(error_message([&] { TuningCache::load(path_); }),
              HasSubstr("Tuning cache " + path_ + " is not valid JSON"));
}

TEST(TuningConfig, TunedIsAChoiceForLayersAndForEachPhase) {
  EXPECT_EQ(parse_attention_config(R"({"backend": "Tuned"})").backend, "tuned");
  EXPECT_EQ(parse_attention_config(R"({"backend_per_kind": {"full_attention": "tuned"}})")
                .backend_per_kind.at(KvCacheKind::kFullAttention),
            "tuned");
  EXPECT_EQ(parse_attention_config(R"({"decode_backend": "TUNED"})").phase_backends.decode,
            "tuned");
}

// Times that depend on the phase: the fastest prefill backend is not the fastest decode one.
class PhaseTimer final : public BackendTimer {
 public:
  double median_forward_us(const AttentionBackend& backend, const SelectorConfig& /*layer*/,
                           const Platform& /*platform*/, const ShapeBucket& bucket,
                           int* repeats) override {
    calls.push_back(std::string(backend.name()) + " " + bucket.describe());
    *repeats = 1;
    const bool flash = backend.name() == "CPU_FLASH";
    if (bucket.phase == Phase::kDecode) return flash ? 5.0 : 50.0;
    return flash ? 80.0 : 20.0;
  }
  std::vector<std::string> calls;
};

TEST_F(TuningTest, EachTunedPhaseTakesItsOwnFastestAndTheyPair) {
  auto timer = std::make_shared<PhaseTimer>();
  const auto tuning = std::make_shared<const Tuning>(path_, timer, kBuckets);
  const Selector both(parse_attention_config(
                          R"({"prefill_backend": "tuned", "decode_backend": "tuned"})", registry_),
                      registry_, tuning);
  const auto r = both.select(layer(), cpu());
  ASSERT_TRUE(r->phases) << to_text(*r);
  EXPECT_EQ(r->phases->prefill, "REFERENCE");
  EXPECT_EQ(r->phases->decode, "CPU_FLASH");
  EXPECT_EQ(r->chosen_by, ChosenBy::kTuned);
  ASSERT_EQ(r->phase_tuning.size(), 2u);
  EXPECT_EQ(r->phase_tuning[0].phase, Phase::kPrefill);
  EXPECT_EQ(r->phase_tuning[0].winner, "REFERENCE");
  EXPECT_EQ(r->phase_tuning[1].winner, "CPU_FLASH");
  // Each phase was timed on its own buckets only.
  for (const std::string& call : timer->calls) {
    EXPECT_THAT(call, ::testing::AnyOf(HasSubstr("prefill b1 q64"), HasSubstr("decode b2 q1")));
  }
  EXPECT_EQ(timer->calls.size(), 4u);
  EXPECT_THAT(to_text(*r), HasSubstr("tuned (decode rows): CPU_FLASH is fastest"));

  // The whole-layer choice sums both phases: REFERENCE 50+20 = 70 against CPU_FLASH
  // 5+80 = 85, one backend for both (from the cache now).
  const Selector whole(parse_attention_config(R"({"backend": "tuned"})", registry_), registry_,
                       tuning);
  const auto w = whole.select(layer(), cpu());
  EXPECT_EQ(w->backend, "REFERENCE");
  EXPECT_FALSE(w->phases);
  EXPECT_EQ(timer->calls.size(), 4u);
}

TEST_F(TuningTest, ATunedPhaseBesideANamedOneOnlyConsidersBackendsThatPair) {
  BackendCapabilities caps = testing::full_caps();
  caps.kernel_block_sizes = SizeRule::list({32});  // CPU_FLASH (16 only) does not pair
  registry_.register_backend("BLOCK32", testing::fake_factory("BLOCK32", caps));
  auto timer = std::make_shared<PhaseTimer>();
  const Selector s(parse_attention_config(
                       R"({"prefill_backend": "BLOCK32", "decode_backend": "tuned"})", registry_),
                   registry_, std::make_shared<const Tuning>(path_, timer, kBuckets));
  const auto r = s.select(layer(), cpu());
  ASSERT_TRUE(r->phases) << to_text(*r);
  // REFERENCE and BLOCK32 both pair and tie on decode; the priority order breaks the tie.
  EXPECT_EQ(r->phases->decode, "REFERENCE");
  for (const std::string& call : timer->calls) EXPECT_THAT(call, Not(HasSubstr("CPU_FLASH")));
}

TEST(TuningCachePath, EnvironmentVariableOverridesTheDefault) {
  ::setenv(kTuningCacheEnvVar, "/tmp/somewhere/tuning.json", 1);
  EXPECT_EQ(default_tuning_cache_path(), "/tmp/somewhere/tuning.json");
  ::unsetenv(kTuningCacheEnvVar);
  ::setenv("XDG_CACHE_HOME", "/tmp/xdg", 1);
  EXPECT_EQ(default_tuning_cache_path(), "/tmp/xdg/attnkit/tuning.json");
  ::unsetenv("XDG_CACHE_HOME");
}

}  // namespace
}  // namespace attnkit
