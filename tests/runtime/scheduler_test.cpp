// The scheduler against a counting allocator: one full-attention group of `block_size`
// token blocks, optionally a sliding window, and a hard block budget.
#include "attnkit/runtime/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>

#include "attnkit/core/error.h"

namespace attnkit {
namespace {

class CountingAllocator : public KvBlockAllocator {
 public:
  CountingAllocator(int blocks, int block_size, int window = 0)
      : blocks_(blocks), block_size_(block_size), window_(window) {}

  bool allocate(const RequestSpec& r, int num_computed, int num_new) override {
    Held& h = held_[r.id];
    const int end = num_computed + num_new;
    const int want_blocks = (end + block_size_ - 1) / block_size_ - h.released;
    const int cross = (num_computed == 0 && r.encoder_len > 0 && h.cross == 0)
                          ? (r.encoder_len + block_size_ - 1) / block_size_
                          : 0;
    const int extra = std::max(want_blocks - h.blocks, 0) + cross;
    if (used_ + extra > blocks_) return false;
    used_ += extra;
    h.blocks = std::max(want_blocks, h.blocks);
    h.cross += cross;
    peak_ = std::max(peak_, used_);
    return true;
  }
  void release_invisible(const RequestSpec& r, int num_computed) override {
    if (window_ == 0) return;
    Held& h = held_[r.id];
    // Blocks entirely before the first key the next query can see.
    const int first_visible = std::max(num_computed - window_ + 1, 0);
    const int releasable = first_visible / block_size_ - h.released;
    if (releasable > 0) {
      h.released += releasable;
      h.blocks -= releasable;
      used_ -= releasable;
    }
  }
  void free(const RequestSpec& r) override {
    Held& h = held_[r.id];
    used_ -= h.blocks + h.cross;
    h = Held{};
    ++frees_[r.id];
  }
  int num_usable_blocks() const override { return blocks_; }

  int used() const { return used_; }
  int peak() const { return peak_; }
  int frees(int id) const { return frees_.count(id) ? frees_.at(id) : 0; }

 private:
  struct Held {
    int blocks = 0, released = 0, cross = 0;
  };
  int blocks_, block_size_, window_;
  int used_ = 0, peak_ = 0;
  std::map<int, Held> held_;
  std::map<int, int> frees_;
};

// Runs to completion; returns every step and checks per-step invariants on the way.
std::vector<SchedulerStep> run_all(Scheduler& s, const SchedulerOptions& o) {
  std::vector<SchedulerStep> steps;
  for (int guard = 0; !s.done() && guard < 10000; ++guard) {
    SchedulerStep step = s.schedule();
    EXPECT_FALSE(step.empty());
    EXPECT_LE(step.num_tokens, o.max_batch_tokens);
    EXPECT_LE(static_cast<int>(step.chunks.size()), o.max_num_seqs);
    int sum = 0;
    for (const auto& c : step.chunks) {
      EXPECT_GE(c.num_new, 1);
      EXPECT_EQ(c.num_computed, s.num_computed(c.request_id));
      sum += c.num_new;
    }
    EXPECT_EQ(sum, step.num_tokens);
    s.finish_step(step);
    steps.push_back(std::move(step));
  }
  EXPECT_TRUE(s.done());
  return steps;
}

TEST(Scheduler, ChunksLongPromptsAndMixesDecodesWithPrefill) {
  CountingAllocator alloc(1000, 16);
  SchedulerOptions o{.max_batch_tokens = 64, .max_num_seqs = 8};
  Scheduler s(o, alloc);
  s.add_request({.id = 0, .prompt_len = 20, .output_len = 4});
  s.add_request({.id = 1, .prompt_len = 150, .output_len = 3});

  SchedulerStep first = s.schedule();
  ASSERT_EQ(first.chunks.size(), 2u);
  EXPECT_EQ(first.chunks[0].num_new, 20);  // whole prompt of request 0
  EXPECT_EQ(first.chunks[1].num_new, 44);  // first chunk of request 1: the rest of the budget
  s.finish_step(first);
  EXPECT_EQ(s.num_generated(0), 1);
  EXPECT_EQ(s.num_generated(1), 0);

  SchedulerStep second = s.schedule();
  ASSERT_EQ(second.chunks.size(), 2u);
  EXPECT_EQ(second.chunks[0].request_id, 0);  // a decode ...
  EXPECT_EQ(second.chunks[0].num_new, 1);
  EXPECT_EQ(second.chunks[0].num_computed, 20);
  EXPECT_EQ(second.chunks[1].request_id, 1);  // ... next to a prefill chunk
  EXPECT_EQ(second.chunks[1].num_computed, 44);
  EXPECT_EQ(second.chunks[1].num_new, 63);
  s.finish_step(second);

  const auto rest = run_all(s, o);
  EXPECT_EQ(alloc.used(), 0);  // finished requests free everything
  EXPECT_EQ(s.num_finished(), 2);
  EXPECT_EQ(s.num_preemptions(), 0);
}

TEST(Scheduler, EveryRequestComputesPromptPlusOutputMinusOneTokens) {
  CountingAllocator alloc(10000, 16);
  SchedulerOptions o{.max_batch_tokens = 48, .max_num_seqs = 3};
  Scheduler s(o, alloc);
  std::map<int, int> expected, seen;
  for (const RequestSpec& r : make_workload({.num_requests = 9,
                              .min_prompt_len = 1,
                              .max_prompt_len = 90,
                              .output_len = 5,
                              .arrival_interval = 2,
                              .seed = 7})) {
    s.add_request(r);
    expected[r.id] = r.total_computed_tokens();
  }
  for (const auto& step : run_all(s, o)) {
    for (const auto& c : step.chunks) {
      EXPECT_GE(step.step, s.request(c.request_id).arrival_step);
      seen[c.request_id] += c.num_new;
    }
  }
  EXPECT_EQ(seen, expected);
  for (const auto& [id, n] : expected) EXPECT_EQ(s.num_generated(id), 5);
}

TEST(Scheduler, JumpsToTheNextArrivalInsteadOfIdling) {
  CountingAllocator alloc(100, 16);
  SchedulerOptions o;
  Scheduler s(o, alloc);
  s.add_request({.id = 3, .prompt_len = 5, .output_len = 1, .arrival_step = 40});
  const SchedulerStep step = s.schedule();
  EXPECT_EQ(step.step, 40);
  ASSERT_EQ(step.chunks.size(), 1u);
  s.finish_step(step);
  EXPECT_TRUE(s.done());
  EXPECT_TRUE(s.schedule().empty());
}

// The last arrival step an int can hold: the steps after it count on past INT_MAX (steps
// are 64-bit; an int step once overflowed here).
TEST(Scheduler, RunsPastTheLastArrivalAnIntCanHold) {
  CountingAllocator alloc(100, 16);
  SchedulerOptions o;
  Scheduler s(o, alloc);
  constexpr int kLast = std::numeric_limits<int>::max();
  s.add_request({.id = 0, .prompt_len = 5, .output_len = 3, .arrival_step = kLast});
  const std::vector<SchedulerStep> steps = run_all(s, o);
  ASSERT_EQ(steps.size(), 3u);  // the prompt, then two decodes
  EXPECT_EQ(steps.front().step, int64_t{kLast});
  EXPECT_EQ(steps.back().step, int64_t{kLast} + 2);
  EXPECT_EQ(s.current_step(), int64_t{kLast} + 3);
  EXPECT_EQ(s.num_generated(0), 3);
}

TEST(Scheduler, PreemptsTheNewestRequestWhenBlocksRunOutAndRecomputesIt) {
  // 6 blocks of 4 tokens; two requests that each end at 4 + 8 - 1 = 11 tokens (3 blocks)
  // fit, three do not: the last admitted is preempted and later recomputed from token 0.
  CountingAllocator alloc(6, 4);
  SchedulerOptions o{.max_batch_tokens = 64, .max_num_seqs = 8};
  Scheduler s(o, alloc);
  for (int id = 0; id < 3; ++id) s.add_request({.id = id, .prompt_len = 4, .output_len = 8});
  bool saw_recompute = false;
  std::map<int, int> generated_at_preemption;
  while (!s.done()) {
    const SchedulerStep step = s.schedule();
    for (int victim : step.preempted) {
      EXPECT_EQ(s.num_computed(victim), 0);  // its cache is gone
      for (const auto& c : step.chunks) EXPECT_NE(c.request_id, victim);
      generated_at_preemption[victim] = s.num_generated(victim);
    }
    for (const auto& c : step.chunks) {
      // A re-admitted request restarts at 0 and recomputes its prompt plus the tokens it
      // had generated, in one prefill.
      if (c.num_computed == 0 && generated_at_preemption.count(c.request_id)) {
        EXPECT_EQ(c.num_new, 4 + generated_at_preemption[c.request_id]);
        saw_recompute = true;
      }
    }
    EXPECT_LE(alloc.used(), 6);
    s.finish_step(step);
  }
  EXPECT_GT(s.num_preemptions(), 0);
  EXPECT_TRUE(saw_recompute);
  EXPECT_GT(alloc.frees(2), 1);  // preempted (freed) and later finished (freed again)
  for (int id = 0; id < 3; ++id) EXPECT_EQ(s.num_generated(id), 8);
  EXPECT_EQ(alloc.used(), 0);
}

TEST(Scheduler, ReleasesOutOfWindowBlocksSoLongRequestsFitASmallCache) {
  // Window 8, blocks of 4: a request of 200 tokens needs at most a handful of blocks
  // at a time; without release it would need 50.
  CountingAllocator alloc(6, 4, /*window=*/8);
  SchedulerOptions o{.max_batch_tokens = 4, .max_num_seqs = 1};
  Scheduler s(o, alloc);
  s.add_request({.id = 0, .prompt_len = 150, .output_len = 51});
  run_all(s, o);
  EXPECT_EQ(s.num_generated(0), 51);
  EXPECT_LE(alloc.peak(), 5);
  EXPECT_EQ(s.num_preemptions(), 0);
}

TEST(Scheduler, EncoderDecoderRequestsRunTheEncoderOnEveryAdmission) {
  CountingAllocator alloc(100, 16);
  SchedulerOptions o;
  Scheduler s(o, alloc);
  s.add_request({.id = 0, .prompt_len = 3, .output_len = 3, .encoder_len = 40});
  SchedulerStep step = s.schedule();
  ASSERT_EQ(step.chunks.size(), 1u);
  EXPECT_TRUE(step.chunks[0].run_encoder);
  EXPECT_EQ(alloc.used(), 1 + 3);  // one self-attention block, three cross-attention blocks
  s.finish_step(step);
  step = s.schedule();
  EXPECT_FALSE(step.chunks[0].run_encoder);
}

TEST(Scheduler, NonChunkedPrefillRunsEachPromptInOnePass) {
  CountingAllocator alloc(1000, 16);
  SchedulerOptions o{.max_batch_tokens = 100, .max_num_seqs = 8, .chunked_prefill = false};
  Scheduler s(o, alloc);
  for (int id = 0; id < 4; ++id) s.add_request({.id = id, .prompt_len = 40, .output_len = 1});
  const auto steps = run_all(s, o);
  ASSERT_EQ(steps.size(), 2u);  // 40 + 40 fit in 100, the third does not: next step
  EXPECT_EQ(steps[0].chunks.size(), 2u);
  for (const auto& step : steps) {
    for (const auto& c : step.chunks) EXPECT_EQ(c.num_new, 40);
  }
  EXPECT_THROW(s.add_request({.id = 9, .prompt_len = 101, .output_len = 1}), Error);
}

TEST(Scheduler, ARequestThatCannotFitAloneIsAnOutOfMemoryError) {
  CountingAllocator alloc(2, 4);
  SchedulerOptions o{.max_batch_tokens = 64};
  Scheduler s(o, alloc);
  s.add_request({.id = 0, .prompt_len = 30, .output_len = 1});
  try {
    s.schedule();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kOutOfMemory);
    EXPECT_NE(std::string(e.what()).find("request 0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("2 blocks"), std::string::npos) << e.what();
  }
}

TEST(Scheduler, RejectsBadRequestsAndOptions) {
  CountingAllocator alloc(10, 4);
  EXPECT_THROW(Scheduler(SchedulerOptions{.max_batch_tokens = 0}, alloc), Error);
  EXPECT_THROW(Scheduler(SchedulerOptions{.max_num_seqs = 0}, alloc), Error);
  Scheduler s(SchedulerOptions{}, alloc);
  EXPECT_THROW(s.add_request({.id = -1}), Error);
  EXPECT_THROW(s.add_request({.id = 1, .prompt_len = 0}), Error);
  EXPECT_THROW(s.add_request({.id = 1, .output_len = 0}), Error);
  EXPECT_THROW(s.add_request({.id = 1, .arrival_step = -2}), Error);
  s.add_request({.id = 1});
  EXPECT_THROW(s.add_request({.id = 1}), Error);
  EXPECT_THROW(s.request(77), Error);
}

TEST(Workload, IsReproducibleAndWithinItsRanges) {
  const WorkloadOptions o{.num_requests = 50,
                          .min_prompt_len = 10,
                          .max_prompt_len = 20,
                          .output_len = 3,
                          .arrival_interval = 1,
                          .min_encoder_len = 5,
                          .max_encoder_len = 9,
                          .seed = 42};
  const auto a = make_workload(o);
  const auto b = make_workload(o);
  ASSERT_EQ(a.size(), 50u);
  bool varied = false;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].prompt_len, b[i].prompt_len);
    EXPECT_GE(a[i].prompt_len, 10);
    EXPECT_LE(a[i].prompt_len, 20);
    EXPECT_GE(a[i].encoder_len, 5);
    EXPECT_LE(a[i].encoder_len, 9);
    EXPECT_EQ(a[i].arrival_step, static_cast<int>(i));
    varied = varied || a[i].prompt_len != a[0].prompt_len;
  }
  EXPECT_TRUE(varied);
  WorkloadOptions other = o;
  other.seed = 43;
  const auto c = make_workload(other);
  bool differs = false;
  for (size_t i = 0; i < a.size(); ++i) differs = differs || a[i].prompt_len != c[i].prompt_len;
  EXPECT_TRUE(differs);
  EXPECT_THROW(make_workload({.num_requests = 0}), Error);
  EXPECT_THROW(make_workload({.min_prompt_len = 9, .max_prompt_len = 3}), Error);
}

TEST(Workload, ParsesLengthRanges) {
  EXPECT_EQ(parse_length_range("32:128", "prompt length"), std::make_pair(32, 128));
  EXPECT_EQ(parse_length_range("7", "prompt length"), std::make_pair(7, 7));
  for (const char* bad : {"", "0", "5:3", "a:4", "3:", ":3", "1:2:3", "-1"}) {
    try {
      parse_length_range(bad, "prompt length");
      ADD_FAILURE() << "accepted " << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("MIN:MAX"), std::string::npos);
    }
  }
}

}  // namespace
}  // namespace attnkit
