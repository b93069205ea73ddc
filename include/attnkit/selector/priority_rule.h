#pragma once
// Priority rules: which backends automatic selection tries first for a layer, as data.
//
// A rule is a condition over the layer (platform, head size, head count, KV heads, GQA
// ratio, KV-cache dtype, causality, MLA) and an order of backend names. The first rule
// whose condition holds gives the head of the layer's priority list; the platform's other
// candidates follow it in their usual order, so a rule reorders and never hides a
// backend from the report. The user's rules (the attention config's "priority") are tried
// before the built-in ones (builtin_priority_rules(), selector/priority.h).
//
// JSON form of one rule (every "when" key optional; an empty "when" always holds):
//   {"name": "small-heads",
//    "when": {"platform": "cpu", "head_size": [64, 128], "num_heads": {"min": 1, "max": 16},
//             "num_kv_heads": {"max": 8}, "gqa_ratio": {"min": 4},
//             "kv_cache_dtype": ["fp8_e4m3"], "causal": true, "mla": false},
//    "order": ["REFERENCE", "CPU_FLASH"]}

#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "attnkit/backend/selector_config.h"
#include "attnkit/core/enums.h"
#include "attnkit/export.h"

namespace attnkit {

// An inclusive integer range; an unset bound is open.
struct ATTNKIT_API IntRange {
  std::optional<int> min;
  std::optional<int> max;
  bool contains(int value) const;
  bool operator==(const IntRange&) const = default;
};

struct ATTNKIT_API PriorityCondition {
  std::optional<PlatformKind> platform;
  std::vector<int> head_sizes;  // empty = any
  std::optional<IntRange> num_heads;
  std::optional<IntRange> num_kv_heads;
  // num_heads / num_kv_heads (queries per KV head); a layer of unknown head counts has
  // none and matches no gqa_ratio condition.
  std::optional<IntRange> gqa_ratio;
  std::vector<KvCacheDType> kv_cache_dtypes;  // empty = any (the layer's resolved dtype)
  std::optional<bool> causal;
  std::optional<bool> mla;

  bool matches(const SelectorConfig& layer, PlatformKind platform_kind) const;
  // "mla=true, kv_cache_dtype in {fp8_e4m3}", or "always".
  std::string describe() const;
  bool operator==(const PriorityCondition&) const = default;
};

struct ATTNKIT_API PriorityRule {
  std::string name;
  PriorityCondition when;
  std::vector<std::string> order;  // canonical backend names, best first
  bool operator==(const PriorityRule&) const = default;
};

// The rule that ordered one layer's automatic walk, for reports.
struct ATTNKIT_API PriorityDecision {
  std::string rule;       // its name
  std::string condition;  // PriorityCondition::describe()
  bool from_config = false;
  std::vector<std::string> order;  // the walk, best first (after filtering by the registry)
  bool operator==(const PriorityDecision&) const = default;
};

// Parses one rule (the JSON form above); `where` names it in errors ("priority[2]").
// Backend names are canonicalised by `canonical` (which throws for unknown names).
// Throws Error naming the bad key or value and listing the valid ones.
ATTNKIT_API PriorityRule
parse_priority_rule(const nlohmann::json& value, std::string_view where,
                    const std::function<std::string(std::string_view)>& canonical);

ATTNKIT_API nlohmann::json to_json(const PriorityRule& rule);
ATTNKIT_API nlohmann::json to_json(const PriorityDecision& decision);

}  // namespace attnkit
