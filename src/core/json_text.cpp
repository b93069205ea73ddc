#include "attnkit/core/json_text.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <system_error>
#include <unordered_set>
#include <vector>

#include "attnkit/core/error.h"

namespace attnkit {

namespace {

using Json = nlohmann::json;

// One open array or object while parsing: the keys seen so far (objects) and where it
// sits, for messages ("'rope_scaling'", "'layers[]'").
struct OpenValue {
  bool is_object = false;
  std::string path;
  std::string last_key;
  std::unordered_set<std::string> keys;
};

std::string cut(std::string text, size_t max_chars = 60) {
  if (text.size() > max_chars) text = text.substr(0, max_chars) + "...";
  return text;
}

// "'rope_scaling'" or "the top-level object", for messages.
std::string where(const std::vector<OpenValue>& open) {
  if (open.empty()) return "the top-level value";
  const OpenValue& inner = open.back();
  if (inner.path.empty()) return inner.is_object ? "the top-level object" : "the top-level array";
  return fmt::format("'{}'", cut(inner.path));
}

// Drops nlohmann's "[json.exception.parse_error.101] " tag; keeps the position.
std::string without_tag(const std::string& what) {
  const size_t end = what.find("] ");
  if (what.rfind("[json.exception", 0) == 0 && end != std::string::npos) {
    return what.substr(end + 2);
  }
  return what;
}

}  // namespace

Json parse_json_text(std::string_view text) {
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    throw JsonTextError(fmt::format(
        "NUL byte at offset {} (of {} bytes): a JSON text holds no NUL byte", nul, text.size()));
  }
  std::vector<OpenValue> open;
  auto on_event = [&open](int depth, Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
      case Json::parse_event_t::array_start: {
        if (depth >= kMaxJsonDepth) {
          throw JsonTextError(
              fmt::format("values nest more than {} arrays or objects deep (inside {}); attnkit's "
                          "documents nest 4 levels at most",
                          kMaxJsonDepth, where(open)));
        }
        OpenValue value;
        value.is_object = event == Json::parse_event_t::object_start;
        if (!open.empty()) {
          const OpenValue& parent = open.back();
          if (!parent.is_object) {
            value.path = parent.path + "[]";
          } else {
            value.path = parent.path.empty() ? cut(parent.last_key)
                                             : parent.path + "." + cut(parent.last_key);
          }
        }
        open.push_back(std::move(value));
        break;
      }
      case Json::parse_event_t::object_end:
      case Json::parse_event_t::array_end:
        if (!open.empty()) open.pop_back();
        break;
      case Json::parse_event_t::key: {
        OpenValue& object = open.back();
        std::string key = parsed.get<std::string>();
        if (!object.keys.insert(key).second) {
          throw JsonTextError(fmt::format(
              "duplicate key '{}' in {}: each key may appear once (which value was meant?)",
              cut(key), where(open)));
        }
        object.last_key = std::move(key);
        break;
      }
      case Json::parse_event_t::value:
        break;
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), on_event);
  } catch (const Json::exception& e) {
    // parse_error, or out_of_range for a number too large for a double.
    throw JsonTextError(cut(without_tag(e.what()), 240));
  }
}

std::string read_document(const std::filesystem::path& path, std::string_view what) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (!fs::exists(status)) {
    throw Error(ErrorCode::kNotFound, fmt::format("{} '{}' does not exist", what, path.string()));
  }
  if (fs::is_directory(status)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} '{}' is a directory, not a file", what, path.string()));
  }
  if (!fs::is_regular_file(status)) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} '{}' is not a regular file (a FIFO, socket or device): give "
                            "a file",
                            what, path.string()));
  }
  const auto size = fs::file_size(path, ec);
  if (!ec && size > kMaxDocumentBytes) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} '{}' is {} bytes, more than the {} bytes such a file may hold",
                            what, path.string(), size, kMaxDocumentBytes));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw Error(ErrorCode::kNotFound, fmt::format("{} '{}' cannot be opened: {}", what,
                                                  path.string(), std::strerror(errno)));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string json_excerpt(const Json& value, size_t max_chars) {
  return cut(value.dump(-1, ' ', false, Json::error_handler_t::replace), max_chars);
}

}  // namespace attnkit
