// attnkit::AttentionStack on the CPU: CPU_FLASH stacks against REFERENCE stacks of the same
// model on the same random rows over prefill and decode steps (sliding and full groups,
// learned sinks), the cache written at the step's slots, the all-or-nothing block
// accounting, and every error a caller can hit, with its message.
#include "attnkit/runtime/attention_stack.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "attnkit/core/error.h"
#include "attnkit/model/model_loader.h"
#include "stack_rows.h"

namespace attnkit {
namespace {

using ::testing::HasSubstr;

// float32 throughout: CPU_FLASH and REFERENCE differ only in summation order (online
// softmax against two passes), a few ulps of outputs of size ~1.
constexpr float kTolerance = 2e-5f;

AttentionStackOptions options_with(const std::string& backend = "") {
  AttentionStackOptions o;
  o.dtype = DType::kFloat32;
  o.kv_cache_bytes = size_t{64} << 20;
  if (!backend.empty()) o.attention.backend = backend;
  return o;
}

using testing::output_rows;
using testing::random_rows;
using testing::Rows;

float max_abs_difference(const std::vector<float>& a, const std::vector<float>& b) {
  float worst = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) {
    const float d = std::fabs(a[i] - b[i]);
    if (!(d <= worst)) worst = std::isnan(d) ? INFINITY : d;
  }
  return worst;
}

// Runs the same steps on `ours` and `reference` (both fresh, same model) for `layers`, with
// the same random query/key/value rows, and compares every output.
void expect_same_steps(AttentionStack& ours, AttentionStack& reference,
                       const std::vector<std::vector<StepRequest>>& steps,
                       const std::vector<int>& layers) {
  std::mt19937 rng(1234);
  for (const std::vector<StepRequest>& step : steps) {
    for (const StepRequest& r : step) {
      if (!ours.has_request(r.id)) {
        ours.add_request(r.id);
        reference.add_request(r.id);
      }
    }
    ours.plan_step(step);
    reference.plan_step(step);
    int64_t tokens = 0;
    for (const StepRequest& r : step) tokens += r.num_new_tokens;
    for (int index : layers) {
      const AttentionLayerParams& p = ours.layer(index).params;
      const Rows q = random_rows(tokens, p.num_heads, p.head_size, rng);
      const Rows k = random_rows(tokens, p.num_kv_heads, p.head_size, rng);
      const Rows v = random_rows(tokens, p.num_kv_heads, p.head_size_v, rng);
      Rows a = output_rows(tokens, p.num_heads, p.head_size_v);
      Rows b = output_rows(tokens, p.num_heads, p.head_size_v);
      ours.forward(index, q.view, k.view, v.view, a.view);
      reference.forward(index, q.view, k.view, v.view, b.view);
      EXPECT_LE(max_abs_difference(a.data, b.data), kTolerance)
          << "layer " << index << " (" << ours.layer(index).name << "), step of " << tokens
          << " tokens";
    }
  }
}

TEST(AttentionStack, SlidingAndFullLayersMatchReferenceOverPrefillAndDecode) {
  const ModelDescription model = load_model("gemma-3-1b-it");
  AttentionStack ours(model, options_with());
  AttentionStack reference(model, options_with("REFERENCE"));
  EXPECT_NE(ours.layer(0).group, ours.layer(5).group);
  EXPECT_EQ(ours.layer(0).selection->backend, "CPU_FLASH");
  EXPECT_EQ(reference.layer(0).selection->backend, "REFERENCE");
  EXPECT_EQ(ours.layer(0).params.kind, KvCacheKind::kSlidingWindow);
  EXPECT_EQ(ours.layer(5).params.kind, KvCacheKind::kFullAttention);

  // Prompts beyond the 512-token window, a chunked prefill, then decode steps.
  std::vector<std::vector<StepRequest>> steps = {
      {{1, 0, 530}, {2, 0, 37}},
      {{3, 0, 300}},
      {{3, 300, 260}, {1, 530, 1}, {2, 37, 1}},
  };
  for (int i = 0; i < 3; ++i) {
    steps.push_back({{1, 531 + i, 1}, {2, 38 + i, 1}, {3, 560 + i, 1}});
  }
  expect_same_steps(ours, reference, steps, {0, 5});
  EXPECT_EQ(ours.num_tokens(1), 534);
  EXPECT_EQ(ours.num_tokens(3), 563);
}

TEST(AttentionStack, LearnedSinksMatchReference) {
  const ModelDescription model = load_model("gpt-oss-20b");
  AttentionStack ours(model, options_with());
  AttentionStack reference(model, options_with("REFERENCE"));
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  for (int layer : {0, 1}) {
    std::vector<float> sinks(static_cast<size_t>(ours.layer(layer).params.num_heads));
    for (float& s : sinks) s = uniform(rng);
    ours.set_sinks(layer, sinks);
    reference.set_sinks(layer, sinks);
    EXPECT_EQ(ours.layer(layer).params.sinks, sinks);
  }
  expect_same_steps(ours, reference, {{{7, 0, 150}, {8, 0, 9}}, {{7, 150, 1}, {8, 9, 1}}}, {0, 1});
}

TEST(AttentionStack, ForwardWritesThisStepsKeysAtItsSlots) {
  AttentionStack stack(load_model("llama-3.1-8b-instruct"), options_with());
  stack.add_request(4);
  const std::vector<StepRequest> step = {{4, 0, 3}};
  stack.plan_step(step);
  const AttentionLayerParams& p = stack.layer(2).params;
  std::mt19937 rng(9);
  const Rows q = random_rows(3, p.num_heads, p.head_size, rng);
  const Rows k = random_rows(3, p.num_kv_heads, p.head_size, rng);
  const Rows v = random_rows(3, p.num_kv_heads, p.head_size, rng);
  Rows out = output_rows(3, p.num_heads, p.head_size);
  stack.forward(2, q.view, k.view, v.view, out.view);

  const CommonAttentionMetadata& meta = stack.step_metadata(stack.layer(2).group);
  const KvCacheTensors& cache = stack.kv_cache(2);
  ASSERT_EQ(cache.layout, KvLayout::kNHD);
  ASSERT_EQ(cache.block_size, meta.block_size);
  const auto* keys = static_cast<const float*>(cache.key.data);
  for (int t = 0; t < 3; ++t) {
    const int64_t slot = meta.slot_mapping[static_cast<size_t>(t)];
    const int64_t block = slot / meta.block_size, offset = slot % meta.block_size;
    for (int h = 0; h < p.num_kv_heads; ++h) {
      const float* cached = keys + block * cache.key.stride(0) + offset * cache.key.stride(1) +
                            h * cache.key.stride(2);
      const float* given = k.data.data() + (t * p.num_kv_heads + h) * p.head_size;
      EXPECT_TRUE(std::equal(given, given + p.head_size, cached)) << "token " << t << " head " << h;
    }
  }
}

// Expects `call` to throw Error(code) whose message contains every one of `parts`.
void expect_error(const std::function<void()>& call, ErrorCode code,
                  const std::vector<std::string>& parts) {
  try {
    call();
    ADD_FAILURE() << "expected an error containing '" << parts.front() << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    for (const std::string& part : parts) EXPECT_THAT(e.what(), HasSubstr(part));
  }
}

TEST(AttentionStack, AStepThePoolCannotHoldChangesNothing) {
  AttentionStackOptions o = options_with();
  o.num_blocks = 6;  // the null block and 5 usable
  AttentionStack stack(load_model("llama-3.1-8b-instruct"), o);
  const int block = stack.kv_cache_config().groups[0].cache_block_size();
  stack.add_request(1);
  stack.add_request(2);
  const std::vector<StepRequest> first = {{1, 0, 2 * block}};  // 2 blocks
  stack.plan_step(first);
  EXPECT_EQ(stack.num_free_blocks(), 3);

  // 1 more block for request 1 and 3 for request 2: 4 needed, 3 free.
  const std::vector<StepRequest> too_big = {{1, 2 * block, 1}, {2, 0, 3 * block}};
  expect_error([&] { stack.plan_step(too_big); }, ErrorCode::kOutOfMemory,
               {"out of KV-cache blocks: the step needs 4, 3 free (of 6)"});
  EXPECT_EQ(stack.num_free_blocks(), 3);
  EXPECT_EQ(stack.num_tokens(1), 2 * block);
  EXPECT_EQ(stack.num_tokens(2), 0);
  EXPECT_EQ(stack.step_metadata(0).num_actual_tokens, 2 * block);  // the last plan stands

  const std::vector<StepRequest> fits = {{1, 2 * block, 1}, {2, 0, 2 * block}};
  stack.plan_step(fits);
  EXPECT_EQ(stack.num_free_blocks(), 0);
  stack.free_request(1);
  stack.free_request(2);
  EXPECT_EQ(stack.num_free_blocks(), 5);
}

TEST(AttentionStack, StepsBeyondTheLimitsAreRefusedNamingTheBound) {
  AttentionStackOptions o = options_with();
  o.limits = {.max_num_reqs = 2, .max_num_tokens = 64, .max_blocks_per_req = 0, .max_seq_len = 100};
  AttentionStack stack(load_model("llama-3.1-8b-instruct"), o);
  for (RequestId id : {1, 2, 3}) stack.add_request(id);
  using Batch = std::vector<StepRequest>;
  const auto plan = [&](const Batch& b) { return [&stack, b] { stack.plan_step(b); }; };
  expect_error(plan({}), ErrorCode::kInvalidArgument, {"the batch holds no request"});
  expect_error(plan({{1, 0, 1}, {2, 0, 1}, {3, 0, 1}}), ErrorCode::kInvalidArgument,
               {"3 requests", "max_num_reqs 2"});
  expect_error(plan({{1, 0, 65}}), ErrorCode::kInvalidArgument,
               {"65 query tokens", "max_num_tokens 64"});
  expect_error(plan({{1, 90, 11}}), ErrorCode::kInvalidArgument,
               {"request 1 would hold 101 tokens", "max_seq_len 100"});
  expect_error(plan({{1, 0, 1}, {1, 0, 1}}), ErrorCode::kInvalidArgument,
               {"request 1 appears twice"});
  expect_error(plan({{2, -1, 1}}), ErrorCode::kInvalidArgument,
               {"request 2", "non-negative", "-1 computed"});
  expect_error(plan({{9, 0, 1}}), ErrorCode::kNotFound, {"9"});
  EXPECT_EQ(stack.num_free_blocks(), stack.num_blocks() - 1);  // nothing was allocated
}

TEST(AttentionStack, CallsOnWhatDoesNotExistAreRefusedListingWhatDoes) {
  AttentionStack stack(load_model("gpt-oss-20b"), options_with());
  expect_error([&] { stack.layer(24); }, ErrorCode::kNotFound,
               {"layer 24 is not an attention layer of gpt-oss-20b", "0, 1, 2", "23"});
  expect_error([&] { stack.kv_cache(-1); }, ErrorCode::kNotFound, {"layer -1"});
  expect_error([&] { stack.step_metadata(0); }, ErrorCode::kInvalidArgument,
               {"no step is planned yet"});
  const Rows q = output_rows(1, 64, 64);
  expect_error([&] { stack.forward(0, q.view, q.view, q.view, q.view); },
               ErrorCode::kInvalidArgument, {"forward(layer 0): no step is planned yet"});
  expect_error([&] { stack.set_sinks(0, std::vector<float>(3, 0.0f)); },
               ErrorCode::kInvalidArgument, {"3 sink values given, the layer has 64 heads"});
  stack.add_request(1);
  const std::vector<StepRequest> step = {{1, 0, 1}};
  stack.plan_step(step);
  expect_error([&] { stack.step_metadata(2); }, ErrorCode::kInvalidArgument,
               {"KV-cache group 2 does not exist; groups are 0..1"});

  AttentionStack llama(load_model("llama-3.1-8b-instruct"), options_with());
  expect_error([&] { llama.set_sinks(0, std::vector<float>(32, 0.0f)); },
               ErrorCode::kInvalidArgument, {"has no attention sinks to set"});
}

TEST(AttentionStack, ADescribedPlatformOrAPoolTooSmallIsRefused) {
  AttentionStackOptions o = options_with();
  o.platform = parse_platform("cuda:9.0");
  expect_error([&] { AttentionStack(load_model("llama-3.1-8b-instruct"), o); },
               ErrorCode::kUnsupported, {"platform cuda:9.0 is only described"});
  AttentionStackOptions tiny = options_with();
  tiny.kv_cache_bytes = 1000;
  expect_error([&] { AttentionStack(load_model("llama-3.1-8b-instruct"), tiny); },
               ErrorCode::kInvalidArgument,
               {"kv_cache_bytes 1000 holds fewer than 2 blocks (block 0 is the null block)"});
  AttentionStackOptions no_requests = options_with();
  no_requests.limits.max_num_reqs = 0;
  expect_error([&] { AttentionStack(load_model("llama-3.1-8b-instruct"), no_requests); },
               ErrorCode::kInvalidArgument, {"max_num_reqs must be positive, got 0"});
}

}  // namespace
}  // namespace attnkit
