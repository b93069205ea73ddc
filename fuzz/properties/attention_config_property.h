#pragma once
// Property of the attention-config JSON parser, shared by its fuzzer and the regression
// tests: any input either parses into a config that round-trips through its JSON form, or
// throws attnkit::Error. Violations throw PropertyViolation; any other exception escaping
// is a bug too.
#include <nlohmann/json.hpp>
#include <string_view>

#include "attnkit/core/error.h"
#include "attnkit/selector/attention_config.h"
#include "properties/property_violation.h"

namespace attnkit::fuzz {

inline void check_attention_config(std::string_view text) {
  AttentionConfig config;
  try {
    config = parse_attention_config(text);
  } catch (const Error&) {
    return;
  }
  const AttentionConfig again = parse_attention_config(to_json(config).dump());
  ATTNKIT_PROPERTY(again.backend == config.backend);
  ATTNKIT_PROPERTY(again.backend_per_kind == config.backend_per_kind);
  ATTNKIT_PROPERTY(again.override_mode == config.override_mode);
}

}  // namespace attnkit::fuzz
