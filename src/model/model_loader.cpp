#include "attnkit/model/model_loader.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "attnkit/core/error.h"
#include "attnkit/core/json_text.h"
#include "attnkit/core/layer_kind.h"
#include "model/config_reader.h"
#include "model/embedded_models.h"
#include "model/families.h"

namespace attnkit {

namespace {

using model_detail::ConfigReader;
using model_detail::fail_config;

// Encoder-decoder configs describe their stacks at the top level even when they also
// carry a nested config; everything else with a text_config and no layer count of its own
// (Gemma-3, Llama-4 multimodal checkpoints) describes its text model there.
bool uses_text_config(const ConfigReader& top) {
  return top.has("text_config") && !top.has("num_hidden_layers") && !top.has("encoder_layers") &&
         !top.has("num_layers");
}

std::optional<DType> dtype_of(const ConfigReader& cfg) {
  for (std::string_view key : {"torch_dtype", "dtype"}) {
    const auto& j = cfg.json();
    auto it = j.find(std::string(key));
    if (it == j.end() || it->is_null()) continue;
    if (!it->is_string()) {
      cfg.fail(key, fmt::format("must be a dtype name such as \"bfloat16\", got {}",
                                model_detail::short_dump(*it)));
    }
    try {
      return parse<DType>(it->get<std::string>());
    } catch (const Error&) {
      return std::nullopt;  // e.g. "float8": not a compute dtype; the caller picks one
    }
  }
  return std::nullopt;
}

std::string embedded_list() { return fmt::format("{}", fmt::join(embedded_model_names(), ", ")); }

}  // namespace

ModelDescription parse_model_config(const nlohmann::json& config, std::string_view name,
                                    std::string_view source) {
  if (!config.is_object()) {
    fail_config(source, fmt::format("the top level must be a JSON object, got {}",
                                    model_detail::short_dump(config)));
  }
  const ConfigReader top(config, std::string(source));
  ModelDescription desc;
  desc.name = std::string(name);
  desc.source = std::string(source);
  const std::string top_type = top.opt_string("model_type").value_or("");
  if (top.has("architectures")) {
    auto archs = top.opt_string_list("architectures");
    if (archs && !archs->empty()) desc.architecture = archs->front();
  }

  nlohmann::json text = config;
  std::string prefix;
  std::string model_type = top_type;
  if (uses_text_config(top)) {
    auto nested = top.opt_object("text_config");
    text = nested->json();
    prefix = "text_config.";
    model_type = nested->opt_string("model_type").value_or(top_type);
  }
  // The family's defaults sit under the config's own values (null counts as absent).
  nlohmann::json merged = model_detail::family_defaults(model_type);
  for (const auto& [key, value] : text.items()) {
    if (!value.is_null()) merged[key] = value;
  }
  const ConfigReader cfg(merged, std::string(source), prefix);

  desc.model_type = model_type;
  model_detail::build_layers(cfg, model_type, desc);
  desc.dtype = dtype_of(cfg);
  if (!desc.dtype) desc.dtype = dtype_of(top);

  for (LayerSpec& layer : desc.layers) {
    if (layer.is_attention) {
      layer.kind =
          layer_kind({layer.attn_type, layer.mla.has_value(), layer.sliding_window.has_value(),
                      layer.chunk_size.has_value(), layer.sink_len > 0});
    }
  }
  return desc;
}

ModelDescription parse_model_config_text(std::string_view text, std::string_view name,
                                         std::string_view source) {
  nlohmann::json config;
  try {
    config = parse_json_text(text);
  } catch (const JsonTextError& e) {
    fail_config(source, fmt::format("invalid JSON: {}", e.what()));
  }
  return parse_model_config(config, name, source);
}

ModelDescription load_model_file(const std::filesystem::path& path) {
  std::filesystem::path file = path;
  if (std::filesystem::is_directory(file)) file /= "config.json";
  // A snapshot's file is config.json; its folder carries the model's name.
  std::string name = file.stem().string();
  if (name == "config" && file.has_parent_path()) {
    const std::string parent = file.parent_path().filename().string();
    if (!parent.empty() && parent != ".") name = parent;
  }
  return parse_model_config_text(read_document(file, "Model config file"), name, file.string());
}

ModelDescription load_model(std::string_view path_or_name) {
  const std::filesystem::path path{std::string(path_or_name)};
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) return load_model_file(path);
  std::string_view text = embedded_model_config(path_or_name);
  if (!text.empty()) {
    return parse_model_config_text(text, path_or_name, fmt::format("embedded:{}", path_or_name));
  }
  const bool looks_like_path =
      path_or_name.find('/') != std::string_view::npos || path_or_name.ends_with(".json");
  if (looks_like_path) {
    throw Error(ErrorCode::kNotFound,
                fmt::format("Model config file '{}' does not exist. Embedded models are: {}",
                            path_or_name, embedded_list()));
  }
  throw Error(ErrorCode::kNotFound,
              fmt::format("Unknown model '{}': no such file, and no embedded model of that name. "
                          "Valid embedded models are: {}",
                          path_or_name, embedded_list()));
}

std::vector<std::string> embedded_model_names() {
  std::vector<std::string> names;
  for (const auto& m : model_detail::embedded_models()) names.emplace_back(m.name);
  return names;
}

std::string_view embedded_model_config(std::string_view name) {
  for (const auto& m : model_detail::embedded_models()) {
    if (m.name == name) return m.json;
  }
  return {};
}

}  // namespace attnkit
