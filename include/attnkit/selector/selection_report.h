#pragma once
// Rendering a SelectionResult for people (text) and for programs (JSON). `attnkit explain`
// and `attnkit run` print these per layer / KV-cache group.

#include <nlohmann/json_fwd.hpp>
#include <string>

#include "attnkit/export.h"
#include "attnkit/selector/selector.h"

namespace attnkit {

// Several lines, e.g.
//   full_attention layer (decoder head_size=128 bf16 kv=auto) on cpu: CPU_FLASH (auto)
//     CPU_FLASH      chosen
//     REFERENCE      valid (lower priority)
//   warning: ...
// Every rejected candidate is listed with its reasons. `indent` prefixes every line.
ATTNKIT_API std::string to_text(const SelectionResult& result, std::string_view indent = "");

// {"kind", "config", "platform", "platform_is_local", "backend", "chosen_by", "requested",
//  "override_mode", "runnable", "binary_reason", "candidates": [{"backend", "valid",
//  "reasons", "binary_note", "user_choice"}], "warnings"}
ATTNKIT_API nlohmann::json to_json(const SelectionResult& result);

// The layer's SelectorConfig as JSON (every field; optional ones are null when unset).
ATTNKIT_API nlohmann::json to_json(const SelectorConfig& config);

}  // namespace attnkit
