#pragma once
// Reading a model description from a Hugging Face config.json: a file, a snapshot folder
// holding config.json, JSON text, or one of the configs embedded in the binary at build
// time (models/*.json, by file stem, e.g. "gemma-3-1b-it").
//
// Every reading error is Error(kInvalidArgument) whose message names the source (file or
// embedded name) and the field, e.g.
//   "Cannot read model config 'x.json': field 'num_attention_heads' is missing".

#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "attnkit/export.h"
#include "attnkit/model/model_description.h"

namespace attnkit {

// Builds the description of a parsed config. `name` and `source` label the result and
// every error message.
ATTNKIT_API ModelDescription parse_model_config(const nlohmann::json& config, std::string_view name,
                                                std::string_view source);

// Parses JSON text (invalid JSON is an error naming `source` and the parse position).
ATTNKIT_API ModelDescription parse_model_config_text(std::string_view text, std::string_view name,
                                                     std::string_view source);

// Reads a config.json file, or <dir>/config.json for a folder. A missing file is
// Error(kNotFound) naming it.
ATTNKIT_API ModelDescription load_model_file(const std::filesystem::path& path);

// `path_or_name` is an existing file or folder, else an embedded model name. Anything
// else is Error(kNotFound) listing the embedded names.
ATTNKIT_API ModelDescription load_model(std::string_view path_or_name);

// Names of the embedded configs, sorted.
ATTNKIT_API std::vector<std::string> embedded_model_names();
// The JSON text of an embedded config, or empty when `name` is not embedded.
ATTNKIT_API std::string_view embedded_model_config(std::string_view name);

}  // namespace attnkit
