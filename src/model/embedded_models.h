#pragma once
// The configs of models/*.json, compiled into the library by cmake/embed_models.cmake.

#include <span>
#include <string_view>

namespace attnkit::model_detail {

struct EmbeddedModel {
  std::string_view name;  // file name without .json, e.g. "gemma-3-1b-it"
  std::string_view json;  // the file's text
};

// Sorted by name.
std::span<const EmbeddedModel> embedded_models();

}  // namespace attnkit::model_detail
