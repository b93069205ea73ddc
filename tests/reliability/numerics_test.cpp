// Numerics at the edges, on every CPU backend: huge logits stay finite (and match
// REFERENCE), -inf masks and sinks, fully masked rows write zeros, empty batches and
// requests run, and NaN in one request's inputs never reaches another request's output
// (which stays bitwise equal to a run without the NaN); checked mode reports the request.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "reliability/paged_step.h"

namespace attnkit {
namespace {

using testing::fill_random;
using ::testing::HasSubstr;
using testing::PagedStep;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

struct Backend {
  const char* name;
  bool mla;
};

// Every CPU backend, with the layer kind it serves.
const Backend kBackends[] = {
    {"REFERENCE", false}, {"CPU_FLASH", false}, {"REFERENCE", true}, {"CPU_MLA", true}};

std::string label(const Backend& b) { return std::string(b.name) + (b.mla ? " (MLA)" : ""); }

// Output floats of rows [begin, end).
std::vector<float> rows_of(const PagedStep& s, int begin, int end) {
  const std::vector<float> all = s.output_values();
  const size_t row = all.size() / PagedStep::kTokens;
  return {all.begin() + static_cast<std::ptrdiff_t>(begin * row),
          all.begin() + static_cast<std::ptrdiff_t>(end * row)};
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, float tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << "element " << i;
    ASSERT_NEAR(got[i], want[i], tol) << "element " << i;
  }
}

// Runs `prepare` on the backend's step and on REFERENCE's (same seed, same inputs), and
// checks the backend's output is finite and within `tol` of REFERENCE's.
template <typename F>
void expect_matches_reference(const Backend& b, F prepare, float tol) {
  SCOPED_TRACE(label(b));
  PagedStep step(b.name, b.mla);
  PagedStep reference("REFERENCE", b.mla);
  prepare(step);
  prepare(reference);
  step.run();
  reference.run();
  expect_close(step.output_values(), reference.output_values(), tol);
}

TEST(Numerics, HugeLogitsStayFiniteAndMatchTheReference) {
  // Scores of order 1e4..1e5: exp() of them overflows float unless the softmax subtracts
  // the running maximum first.
  for (const Backend& b : kBackends) {
    expect_matches_reference(
        b,
        [](PagedStep& s) {
          std::mt19937_64 gen(11);
          fill_random(s.q, gen, 300.0f);
          fill_random(s.k, gen, 300.0f);
          fill_random(s.key_cache, gen, 300.0f);
          s.layer.scale = 1.0f;
        },
        2e-3f);
  }
}

TEST(Numerics, SlidingWindowOfOneMasksEveryOtherKey) {
  // Every key but the query's own gets a -inf score: the output is that key's value.
  for (const Backend& b : kBackends) {
    expect_matches_reference(
        b, [](PagedStep& s) { s.layer.sliding_window = 1; }, 1e-5f);
  }
}

TEST(Numerics, MinusInfinitySinksChangeNothingAndHugeSinksTakeAllTheWeight) {
  for (const char* name : {"REFERENCE", "CPU_FLASH"}) {
    SCOPED_TRACE(name);
    PagedStep plain(name);
    plain.run();
    PagedStep no_weight(name);
    no_weight.layer.sinks.assign(4, -kInf);
    no_weight.run();
    expect_close(no_weight.output_values(), plain.output_values(), 1e-6f);
    PagedStep all_weight(name);
    all_weight.layer.sinks.assign(4, 1e4f);
    all_weight.run();
    expect_close(all_weight.output_values(),
                 std::vector<float>(all_weight.output_values().size(), 0.0f), 1e-30f);
  }
}

TEST(Numerics, ARequestThatSeesNoKeyWritesZeros) {
  // Cross attention to an empty encoder (request 1: encoder length 0, 3 queries): every
  // score is masked; the contract says zeros, never 0/0.
  for (const char* name : {"REFERENCE", "CPU_FLASH"}) {
    SCOPED_TRACE(name);
    PagedStep step(name);
    step.layer.attn_type = AttentionType::kEncoderDecoder;
    step.common.causal = false;
    step.common.seq_lens = {6, 0, 5};
    step.common.encoder_seq_lens = step.common.seq_lens;
    step.common.slot_mapping.clear();  // encoder K/V already cached
    step.key = step.value = TensorView{};
    step.run();
    expect_close(rows_of(step, 1, 4), std::vector<float>(3 * 4 * 16, 0.0f), 0.0f);
    PagedStep reference("REFERENCE");
    reference.layer = step.layer;
    reference.common = step.common;
    reference.key = reference.value = TensorView{};
    reference.run();
    expect_close(step.output_values(), reference.output_values(), 1e-5f);
  }
}

TEST(Numerics, EmptyBatchesAndEmptyRequestsRun) {
  for (const Backend& b : kBackends) {
    SCOPED_TRACE(label(b));
    // No request at all: nothing is read or written.
    PagedStep empty(b.name, b.mla);
    empty.common = CommonAttentionMetadata{};
    empty.common.query_start_loc = {0};
    empty.common.block_size = PagedStep::kBlockSize;
    const std::vector<float> before = empty.output_values();
    EXPECT_NO_THROW(empty.run());
    EXPECT_EQ(empty.output_values(), before);
  }
  for (const Backend& b : kBackends) {
    // A fourth request with an empty context and no tokens joins the batch.
    expect_matches_reference(
        b,
        [](PagedStep& s) {
          s.common.num_reqs = 4;
          s.common.query_start_loc.push_back(4);
          s.common.seq_lens.push_back(0);
          s.common.block_table.insert(s.common.block_table.end(), {0, 0});
        },
        1e-5f);
  }
}

// Runs the step with checked mode off, after `poison`; returns the output.
template <typename F>
std::vector<float> run_unchecked(const Backend& b, F poison) {
  PagedStep step(b.name, b.mla);
  step.layer.checked = false;
  poison(step);
  step.run();
  return step.output_values();
}

bool any_non_finite(const std::vector<float>& v) {
  return std::any_of(v.begin(), v.end(), [](float x) { return !std::isfinite(x); });
}

TEST(Numerics, NanInOneRequestNeverReachesAnotherRequestsOutput) {
  for (const Backend& b : kBackends) {
    SCOPED_TRACE(label(b));
    const std::vector<float> clean = run_unchecked(b, [](PagedStep&) {});
    ASSERT_FALSE(any_non_finite(clean));
    const size_t width = clean.size() / PagedStep::kTokens;
    auto rows = [&](const std::vector<float>& v, int begin, int end) {
      return std::vector<float>(v.begin() + static_cast<std::ptrdiff_t>(begin * width),
                                v.begin() + static_cast<std::ptrdiff_t>(end * width));
    };

    // NaN in request 1's inputs: one query element of row 2 and its fresh key at row 3.
    auto poison_request_1 = [](PagedStep& s) {
      s.q.data_as<float>()[2 * s.layer.num_heads * s.layer.head_size + 5] = kNaN;
      s.k.data_as<float>()[3 * s.layer.num_kv_heads * s.layer.head_size + 1] = kNaN;
    };
    const std::vector<float> poisoned = run_unchecked(b, poison_request_1);
    // Request 1's own rows show the NaN (every backend propagates it).
    EXPECT_TRUE(any_non_finite(rows(poisoned, 1, 4)));
    EXPECT_EQ(rows(poisoned, 0, 1), rows(clean, 0, 1));  // bitwise: request 0 untouched

    // Inf in request 0's cached history (block_table[0][0] = block 5, position 0).
    auto poison_history_0 = [](PagedStep& s) {
      const int64_t per_block = PagedStep::kBlockSize * s.layer.num_kv_heads * s.layer.head_size;
      s.key_cache.data_as<float>()[5 * per_block + 3] = kInf;
    };
    const std::vector<float> history = run_unchecked(b, poison_history_0);
    // Inf in the history makes the request's sums NaN: every backend shows it in its rows.
    EXPECT_TRUE(any_non_finite(rows(history, 0, 1)));
    EXPECT_EQ(rows(history, 1, 4), rows(clean, 1, 4));  // bitwise: request 1 untouched

    // Checked mode names request 1 only, after writing every other request's rows.
    PagedStep checked(b.name, b.mla);
    checked.layer.checked = true;
    poison_request_1(checked);
    const std::string message = checked.error_after([](PagedStep&) {});
    EXPECT_THAT(message,
                HasSubstr(std::string(b.name) + ": NaN/inf in layer 0 for 1 of 3 requests"));
    EXPECT_THAT(message, HasSubstr("request 1 query: 1 rows (first: row 2 head 0 dim 5)"));
    EXPECT_THAT(message, HasSubstr("request 1 key: 1 rows (first: row 3 head 0 dim 1)"));
    EXPECT_THAT(message, ::testing::Not(HasSubstr("request 0")));
    EXPECT_EQ(rows(checked.output_values(), 0, 1), rows(clean, 0, 1));
  }
}

}  // namespace
}  // namespace attnkit
