// The proof that per-kind choices cause what runs: on Gemma-3-1B, sliding layers on one
// backend and the full layers on another, then swapped; the backends that EXECUTED (each
// layer implementation's backend_name()) must follow the mapping both ways.
#include <gtest/gtest.h>

#include "attnkit/registry/registry.h"
#include "runner_test_support.h"

namespace attnkit {
namespace {

using testing::run_small;
using testing::SmallRun;

RunReport run_with_mapping(const std::string& sliding, const std::string& full) {
  SmallRun s;
  s.layers_per_kind = 2;
  s.verify_samples = 4;
  s.attention_config = R"({"backend_per_kind": {"sliding_window": ")" + sliding +
                       R"(", "full_attention": ")" + full + R"("}})";
  return run_small(s);
}

void expect_groups_ran(const RunReport& r, const std::string& sliding, const std::string& full) {
  int sliding_groups = 0, full_groups = 0;
  for (const GroupRunReport& g : r.groups) {
    const std::string& want = g.kind == KvCacheKind::kSlidingWindow ? sliding : full;
    (g.kind == KvCacheKind::kSlidingWindow ? sliding_groups : full_groups) += 1;
    ASSERT_TRUE(g.kind == KvCacheKind::kSlidingWindow || g.kind == KvCacheKind::kFullAttention);
    EXPECT_EQ(g.backends_planned, std::vector<std::string>{want}) << to_text(r);
    EXPECT_EQ(g.backends_executed, std::vector<std::string>{want}) << to_text(r);
    EXPECT_EQ(g.chosen_by, "per_kind") << to_text(r);
    EXPECT_GT(g.forward_calls, 0);
  }
  EXPECT_GT(sliding_groups, 0);
  EXPECT_GT(full_groups, 0);
  EXPECT_TRUE(r.verify->passed) << to_text(r);
}

TEST(BackendPerKind, ExecutedBackendsFollowTheMappingBothWays) {
  if (!global_registry().contains("CPU_FLASH")) {
    GTEST_SKIP() << "CPU_FLASH is not registered in this build";
  }
  const RunReport forward = run_with_mapping("REFERENCE", "CPU_FLASH");
  expect_groups_ran(forward, "REFERENCE", "CPU_FLASH");
  const RunReport swapped = run_with_mapping("CPU_FLASH", "REFERENCE");
  expect_groups_ran(swapped, "CPU_FLASH", "REFERENCE");
}

}  // namespace
}  // namespace attnkit
