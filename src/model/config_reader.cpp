#include "model/config_reader.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "attnkit/core/error.h"
#include "attnkit/core/json_text.h"

namespace attnkit::model_detail {

namespace {

// JSON integers may arrive as 4096 or 4096.0; both are integers here.
std::optional<long long> as_integer(const nlohmann::json& v) {
  if (v.is_number_integer()) return v.get<long long>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 9e15) {
      return static_cast<long long>(d);
    }
  }
  return std::nullopt;
}

}  // namespace

std::string short_dump(const nlohmann::json& value) { return json_excerpt(value); }

void fail_config(std::string_view source, std::string_view what) {
  throw Error(ErrorCode::kInvalidArgument,
              fmt::format("Cannot read model config '{}': {}", source, what));
}

ConfigReader::ConfigReader(const nlohmann::json& object, std::string source, std::string prefix)
    : object_(object), source_(std::move(source)), prefix_(std::move(prefix)) {}

const nlohmann::json* ConfigReader::find(std::string_view key) const {
  if (!object_.is_object()) return nullptr;
  auto it = object_.find(std::string(key));
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

bool ConfigReader::has(std::string_view key) const { return find(key) != nullptr; }

std::string ConfigReader::path_of(std::string_view key) const {
  return fmt::format("{}{}", prefix_, key);
}

void ConfigReader::fail(std::string_view key, std::string_view what) const {
  fail_config(source_, fmt::format("field '{}' {}", path_of(key), what));
}

int ConfigReader::positive_int(std::string_view key, int max) const {
  auto v = opt_positive_int(key, max);
  if (!v) fail(key, "is missing");
  return *v;
}

int ConfigReader::layer_count(std::string_view key) const {
  auto v = opt_layer_count(key);
  if (!v) fail(key, "is missing");
  return *v;
}

std::optional<int> ConfigReader::opt_layer_count(std::string_view key) const {
  auto v = opt_positive_int(key);
  if (v && *v > kMaxModelLayers) {
    fail(key, fmt::format("must be at most {} layers (published models have up to about 200), "
                          "got {}",
                          kMaxModelLayers, *v));
  }
  return v;
}

std::optional<int> ConfigReader::opt_positive_int(std::string_view key, int max) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return std::nullopt;
  auto i = as_integer(*v);
  if (!i || *i <= 0) fail(key, fmt::format("must be a positive integer, got {}", short_dump(*v)));
  if (*i > max) fail(key, fmt::format("must be at most {}, got {}", max, short_dump(*v)));
  if (*i > std::numeric_limits<int>::max()) {
    fail(key, fmt::format("must be a positive integer below 2^31, got {}", short_dump(*v)));
  }
  return static_cast<int>(*i);
}

std::optional<int> ConfigReader::opt_non_negative_int(std::string_view key) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return std::nullopt;
  auto i = as_integer(*v);
  if (!i || *i < 0 || *i > std::numeric_limits<int>::max()) {
    fail(key, fmt::format("must be a non-negative integer, got {}", short_dump(*v)));
  }
  return static_cast<int>(*i);
}

std::optional<double> ConfigReader::opt_number(std::string_view key) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_number()) fail(key, fmt::format("must be a number, got {}", short_dump(*v)));
  return v->get<double>();
}

std::optional<bool> ConfigReader::opt_bool(std::string_view key) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_boolean()) fail(key, fmt::format("must be true or false, got {}", short_dump(*v)));
  return v->get<bool>();
}

std::optional<std::string> ConfigReader::opt_string(std::string_view key) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_string()) fail(key, fmt::format("must be a string, got {}", short_dump(*v)));
  return v->get<std::string>();
}

std::optional<std::vector<std::string>> ConfigReader::opt_string_list(std::string_view key) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_array()) {
    fail(key, fmt::format("must be a list of strings, got {}", short_dump(*v)));
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const auto& e = (*v)[i];
    if (!e.is_string()) {
      fail(key, fmt::format("must be a list of strings, but element {} is {}", i, short_dump(e)));
    }
    out.push_back(e.get<std::string>());
  }
  return out;
}

std::optional<std::vector<int>> ConfigReader::opt_int_list(std::string_view key) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_array()) {
    fail(key, fmt::format("must be a list of integers, got {}", short_dump(*v)));
  }
  std::vector<int> out;
  for (size_t i = 0; i < v->size(); ++i) {
    auto n = as_integer((*v)[i]);
    if (!n || *n < std::numeric_limits<int>::min() || *n > std::numeric_limits<int>::max()) {
      fail(key,
           fmt::format("must be a list of integers, but element {} is {}", i, short_dump((*v)[i])));
    }
    out.push_back(static_cast<int>(*n));
  }
  return out;
}

std::optional<ConfigReader> ConfigReader::opt_object(std::string_view key) const {
  const nlohmann::json* v = find(key);
  if (v == nullptr) return std::nullopt;
  if (!v->is_object()) fail(key, fmt::format("must be an object, got {}", short_dump(*v)));
  return ConfigReader(*v, source_, path_of(key) + ".");
}

std::optional<int> ConfigReader::opt_positive_int_any(std::initializer_list<std::string_view> keys,
                                                      int max) const {
  for (std::string_view key : keys) {
    if (auto v = opt_positive_int(key, max)) return v;
  }
  return std::nullopt;
}

}  // namespace attnkit::model_detail
