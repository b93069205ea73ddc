#pragma once
// Typed access to the fields of one JSON object of a config.json, with errors that name
// the source and the field's full path (e.g. "text_config.num_attention_heads"). A field
// that is present but null counts as absent: Hugging Face writes null for "not used".

#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "attnkit/model/model_limits.h"

namespace attnkit::model_detail {

class ConfigReader {
 public:
  static constexpr int kNoBound = std::numeric_limits<int>::max();

  // `object` must outlive the reader. `prefix` is the object's path inside the file
  // ("" at top level, "text_config." when nested).
  ConfigReader(const nlohmann::json& object, std::string source, std::string prefix = "");

  const nlohmann::json& json() const { return object_; }
  const std::string& source() const { return source_; }

  // Present and not null.
  bool has(std::string_view key) const;

  // Required fields: a missing or mistyped field throws, naming it. `max` bounds a size
  // field so that products and sums of sizes cannot overflow (the bounds are in
  // model/model_limits.h); a larger value throws, quoting the bound.
  int positive_int(std::string_view key, int max = kNoBound) const;
  // A layer count: a positive integer no larger than kMaxModelLayers (so that a corrupt
  // config fails with a message instead of allocating billions of layers).
  int layer_count(std::string_view key) const;
  // Optional fields: nullopt when absent or null, an error when present with a bad value.
  std::optional<int> opt_positive_int(std::string_view key, int max = kNoBound) const;
  std::optional<int> opt_layer_count(std::string_view key) const;
  std::optional<int> opt_non_negative_int(std::string_view key) const;
  std::optional<double> opt_number(std::string_view key) const;
  std::optional<bool> opt_bool(std::string_view key) const;
  std::optional<std::string> opt_string(std::string_view key) const;
  std::optional<std::vector<std::string>> opt_string_list(std::string_view key) const;
  std::optional<std::vector<int>> opt_int_list(std::string_view key) const;
  // A nested object, or nullopt when absent/null; an error when it is not an object.
  std::optional<ConfigReader> opt_object(std::string_view key) const;

  // The first present of several alternative spellings of one field, or nullopt.
  std::optional<int> opt_positive_int_any(std::initializer_list<std::string_view> keys,
                                          int max = kNoBound) const;

  // "Cannot read model config '<source>': field '<prefix><key>' <what>".
  [[noreturn]] void fail(std::string_view key, std::string_view what) const;
  // The field's full path, for messages.
  std::string path_of(std::string_view key) const;

 private:
  const nlohmann::json* find(std::string_view key) const;

  const nlohmann::json& object_;
  std::string source_;
  std::string prefix_;
};

// "Cannot read model config '<source>': <what>".
[[noreturn]] void fail_config(std::string_view source, std::string_view what);

// A short rendering of a JSON value for error messages ("\"abc\"", "-3", "[1,2]").
std::string short_dump(const nlohmann::json& value);

}  // namespace attnkit::model_detail
