#pragma once
// Helpers shared by the model tests.

#include <string>
#include <vector>

#include "attnkit/model/model_loader.h"

namespace attnkit::testing {

inline ModelDescription parse_inline(const std::string& json) {
  return parse_model_config_text(json, "inline", "inline.json");
}

// The layer indices whose kind is `kind`.
inline std::vector<int> layers_of_kind(const ModelDescription& m, KvCacheKind kind) {
  std::vector<int> out;
  for (const auto& l : m.layers) {
    if (l.is_attention && l.kind == kind) out.push_back(l.index);
  }
  return out;
}

// 0, step, 2*step, ... below n, shifted by `first`.
inline std::vector<int> every(int first, int step, int n) {
  std::vector<int> out;
  for (int i = first; i < n; i += step) out.push_back(i);
  return out;
}

// [lo, hi)
inline std::vector<int> range(int lo, int hi) { return every(lo, 1, hi); }

}  // namespace attnkit::testing
