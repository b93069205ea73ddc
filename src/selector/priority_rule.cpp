#include "attnkit/selector/priority_rule.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "attnkit/core/error.h"
#include "attnkit/core/json_text.h"

namespace attnkit {
namespace {

[[noreturn]] void bad_value(std::string_view where, std::string_view what,
                            const nlohmann::json& value) {
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("Attention config: {} must be {}, got {} {}", where, what,
                          value.type_name(), json_excerpt(value)));
}

IntRange parse_range(const nlohmann::json& value, std::string_view where) {
  if (!value.is_object()) bad_value(where, "an object {\"min\": N, \"max\": M}", value);
  IntRange range;
  for (const auto& [key, bound] : value.items()) {
    const std::string at = fmt::format("{}['{}']", where, key);
    if (!bound.is_number_integer()) bad_value(at, "an integer", bound);
    if (key == "min") {
      range.min = bound.get<int>();
    } else if (key == "max") {
      range.max = bound.get<int>();
    } else {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("Unknown key '{}' in {}. Valid keys are: max, min", key, where));
    }
  }
  if (range.min && range.max && *range.min > *range.max) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("Attention config: {} is empty (min {} > max {})", where, *range.min,
                            *range.max));
  }
  return range;
}

std::string describe_range(std::string_view name, const IntRange& r) {
  if (r.min && r.max) return fmt::format("{} in [{}, {}]", name, *r.min, *r.max);
  if (r.min) return fmt::format("{} >= {}", name, *r.min);
  if (r.max) return fmt::format("{} <= {}", name, *r.max);
  return fmt::format("{} any", name);
}

nlohmann::json range_json(const IntRange& r) {
  nlohmann::json out = nlohmann::json::object();
  if (r.min) out["min"] = *r.min;
  if (r.max) out["max"] = *r.max;
  return out;
}

template <typename E>
E parse_enum_value(const nlohmann::json& value, std::string_view where) {
  if (!value.is_string()) bad_value(where, "a string", value);
  try {
    return parse<E>(value.get<std::string>());
  } catch (const Error&) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("Attention config: {} '{}' is not valid. Valid values are: {}", where,
                            value.get<std::string>(), valid_spellings<E>()));
  }
}

PriorityCondition parse_condition(const nlohmann::json& value, std::string_view where) {
  if (!value.is_object()) bad_value(where, "an object", value);
  PriorityCondition c;
  for (const auto& [key, v] : value.items()) {
    const std::string at = fmt::format("{}['{}']", where, key);
    if (key == "platform") {
      c.platform = parse_enum_value<PlatformKind>(v, at);
    } else if (key == "head_size") {
      if (!v.is_array() || v.empty()) bad_value(at, "a non-empty array of integers", v);
      for (const nlohmann::json& size : v) {
        if (!size.is_number_integer()) bad_value(at, "a non-empty array of integers", v);
        c.head_sizes.push_back(size.get<int>());
      }
    } else if (key == "num_heads") {
      c.num_heads = parse_range(v, at);
    } else if (key == "num_kv_heads") {
      c.num_kv_heads = parse_range(v, at);
    } else if (key == "gqa_ratio") {
      c.gqa_ratio = parse_range(v, at);
    } else if (key == "kv_cache_dtype") {
      if (!v.is_array() || v.empty()) bad_value(at, "a non-empty array of KV-cache dtypes", v);
      for (const nlohmann::json& dtype : v) {
        c.kv_cache_dtypes.push_back(parse_enum_value<KvCacheDType>(dtype, at));
      }
    } else if (key == "causal" || key == "mla") {
      if (!v.is_boolean()) bad_value(at, "true or false", v);
      (key == "causal" ? c.causal : c.mla) = v.get<bool>();
    } else {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("Unknown key '{}' in {}. Valid keys are: causal, gqa_ratio, "
                              "head_size, kv_cache_dtype, mla, num_heads, num_kv_heads, platform",
                              key, where));
    }
  }
  return c;
}

}  // namespace

bool IntRange::contains(int value) const {
  return (!min || value >= *min) && (!max || value <= *max);
}

bool PriorityCondition::matches(const SelectorConfig& layer, PlatformKind platform_kind) const {
  if (platform && *platform != platform_kind) return false;
  if (!head_sizes.empty() &&
      std::find(head_sizes.begin(), head_sizes.end(), layer.head_size) == head_sizes.end()) {
    return false;
  }
  if (num_heads && !num_heads->contains(layer.num_heads)) return false;
  if (num_kv_heads && !num_kv_heads->contains(layer.num_kv_heads)) return false;
  if (gqa_ratio) {
    if (layer.num_heads <= 0 || layer.num_kv_heads <= 0) return false;
    if (!gqa_ratio->contains(layer.num_heads / layer.num_kv_heads)) return false;
  }
  if (!kv_cache_dtypes.empty()) {
    const KvCacheDType kv = resolve_kv_cache_dtype(layer.kv_cache_dtype, layer.dtype);
    if (std::find(kv_cache_dtypes.begin(), kv_cache_dtypes.end(), kv) == kv_cache_dtypes.end()) {
      return false;
    }
  }
  if (causal && *causal != layer.is_causal()) return false;
  if (mla && *mla != layer.use_mla) return false;
  return true;
}

std::string PriorityCondition::describe() const {
  std::vector<std::string> parts;
  if (platform) parts.push_back(fmt::format("platform={}", to_string(*platform)));
  if (!head_sizes.empty())
    parts.push_back(fmt::format("head_size in {{{}}}", fmt::join(head_sizes, ", ")));
  if (num_heads) parts.push_back(describe_range("num_heads", *num_heads));
  if (num_kv_heads) parts.push_back(describe_range("num_kv_heads", *num_kv_heads));
  if (gqa_ratio) parts.push_back(describe_range("gqa_ratio", *gqa_ratio));
  if (!kv_cache_dtypes.empty()) {
    std::vector<std::string_view> names;
    for (KvCacheDType d : kv_cache_dtypes) names.push_back(to_string(d));
    parts.push_back(fmt::format("kv_cache_dtype in {{{}}}", fmt::join(names, ", ")));
  }
  if (causal) parts.push_back(fmt::format("causal={}", *causal));
  if (mla) parts.push_back(fmt::format("mla={}", *mla));
  return parts.empty() ? std::string("always") : fmt::format("{}", fmt::join(parts, ", "));
}

PriorityRule parse_priority_rule(const nlohmann::json& value, std::string_view where,
                                 const std::function<std::string(std::string_view)>& canonical) {
  if (!value.is_object()) bad_value(where, "an object {\"name\", \"when\", \"order\"}", value);
  PriorityRule rule;
  bool has_order = false;
  for (const auto& [key, v] : value.items()) {
    const std::string at = fmt::format("{}['{}']", where, key);
    if (key == "name") {
      if (!v.is_string()) bad_value(at, "a string", v);
      rule.name = v.get<std::string>();
    } else if (key == "when") {
      rule.when = parse_condition(v, at);
    } else if (key == "order") {
      if (!v.is_array() || v.empty()) bad_value(at, "a non-empty array of backend names", v);
      for (const nlohmann::json& name : v) {
        if (!name.is_string()) bad_value(at, "a non-empty array of backend names", v);
        rule.order.push_back(canonical(name.get<std::string>()));
      }
      has_order = true;
    } else {
      throw Error(
          ErrorCode::kInvalidArgument,
          fmt::format("Unknown key '{}' in {}. Valid keys are: name, order, when", key, where));
    }
  }
  if (!has_order) {
    throw Error(
        ErrorCode::kInvalidArgument,
        fmt::format("Attention config: {} has no 'order' (the backends to try first)", where));
  }
  if (rule.name.empty()) rule.name = std::string(where);
  return rule;
}

nlohmann::json to_json(const PriorityRule& rule) {
  const PriorityCondition& c = rule.when;
  nlohmann::json when = nlohmann::json::object();
  if (c.platform) when["platform"] = to_string(*c.platform);
  if (!c.head_sizes.empty()) when["head_size"] = c.head_sizes;
  if (c.num_heads) when["num_heads"] = range_json(*c.num_heads);
  if (c.num_kv_heads) when["num_kv_heads"] = range_json(*c.num_kv_heads);
  if (c.gqa_ratio) when["gqa_ratio"] = range_json(*c.gqa_ratio);
  if (!c.kv_cache_dtypes.empty()) {
    nlohmann::json dtypes = nlohmann::json::array();
    for (KvCacheDType d : c.kv_cache_dtypes) dtypes.push_back(to_string(d));
    when["kv_cache_dtype"] = dtypes;
  }
  if (c.causal) when["causal"] = *c.causal;
  if (c.mla) when["mla"] = *c.mla;
  return {{"name", rule.name}, {"when", when}, {"order", rule.order}};
}

nlohmann::json to_json(const PriorityDecision& d) {
  return {{"rule", d.rule},
          {"when", d.condition},
          {"source", d.from_config ? "config" : "builtin"},
          {"order", d.order}};
}

}  // namespace attnkit
