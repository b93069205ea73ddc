// The runtime's timer and the tuned choice on first use: an AttentionStack asked for
// "tuned" times every valid backend of its layers (one-layer stacks, fresh random inputs),
// saves the times, and runs the winner; a second stack reuses the saved times.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "attnkit/model/model_loader.h"
#include "attnkit/runtime/attention_stack.h"
#include "attnkit/runtime/backend_timer.h"

namespace attnkit {
namespace {

using ::testing::HasSubstr;

const std::vector<ShapeBucket> kSmall = {{Phase::kDecode, 2, 1, 48}, {Phase::kPrefill, 1, 16, 16}};

std::string temp_cache(const char* name) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("attnkit_" + std::string(name) + std::to_string(::getpid()) + ".json"))
                               .string();
  std::filesystem::remove(path);
  return path;
}

SelectorConfig small_layer() {
  SelectorConfig c;
  c.head_size = c.head_size_v = 64;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.dtype = DType::kFloat32;
  c.kv_cache_dtype = KvCacheDType::kFloat32;
  return c;
}

TEST(BackendTimer, TimesARealForwardWithTheMedianOfItsRepeats) {
  const std::shared_ptr<BackendTimer> timer = make_backend_timer({.warmup = 1, .repeats = 3});
  for (const char* name : {"REFERENCE", "CPU_FLASH"}) {
    int repeats = 0;
    const double us = timer->median_forward_us(*global_registry().get(name), small_layer(),
                                               cpu_platform(), kSmall[0], &repeats);
    EXPECT_GT(us, 0.0) << name;
    EXPECT_LT(us, 1e6) << name;
    EXPECT_EQ(repeats, 3);
  }
  EXPECT_THROW(make_backend_timer({.repeats = 0}), Error);
}

TEST(TunedStack, TunesOnFirstUseSavesAndReuses) {
  const std::string path = temp_cache("tuned_stack_");
  AttentionStackOptions o;
  o.dtype = DType::kFloat32;
  o.kv_cache_bytes = size_t{16} << 20;
  o.attention = parse_attention_config(R"({"backend": "tuned"})");
  o.tuning = make_measuring_tuning(path, {.warmup = 0, .repeats = 2}, kSmall);
  const ModelDescription model = load_model("llama-3.1-8b-instruct");
  AttentionStack first(model, o);
  const SelectionResult& s = *first.layer(0).selection;
  EXPECT_EQ(s.chosen_by, ChosenBy::kTuned);
  ASSERT_TRUE(s.tuning);
  ASSERT_EQ(s.tuning->timings.size(), 2u);  // CPU_FLASH and REFERENCE, both valid
  EXPECT_EQ(s.backend, s.tuning->timings[0].backend);
  EXPECT_LE(s.tuning->timings[0].total_us, s.tuning->timings[1].total_us);
  EXPECT_TRUE(s.tuning->timings[0].measured_now);
  EXPECT_THAT(s.tuning->why, HasSubstr(" is fastest: "));
  ASSERT_TRUE(std::filesystem::exists(path));

  AttentionStack second(model, o);
  const SelectionResult& again = *second.layer(0).selection;
  EXPECT_EQ(again.backend, s.backend);
  EXPECT_FALSE(again.tuning->timings[0].measured_now);
  EXPECT_EQ(again.tuning->timings, [&] {
    auto t = s.tuning->timings;
    for (CandidateTiming& c : t) c.measured_now = false;
    return t;
  }());
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace attnkit
