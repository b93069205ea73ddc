#include "attnkit/core/json_text.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <optional>
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

// Python's bare non-finite words, each replaced by a string no real document holds (it
// starts with the noncharacter U+FDD0) and turned back into its float after parsing.
struct NonFinite {
  std::string_view word;
  std::string_view marker;
  double value;
};
const NonFinite kNonFinite[] = {
    {"-Infinity", "\ufdd0-Infinity", -std::numeric_limits<double>::infinity()},
    {"Infinity", "\ufdd0Infinity", std::numeric_limits<double>::infinity()},
    {"NaN", "\ufdd0NaN", std::numeric_limits<double>::quiet_NaN()},
};

bool is_delimiter(char c) {
  return c == ',' || c == ']' || c == '}' || c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

// The text with every bare NaN / Infinity / -Infinity value (outside strings) quoted as
// its marker; nullopt when there is none.
std::optional<std::string> quote_non_finite(std::string_view text) {
  std::string out;
  bool found = false;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\' && i + 1 < text.size()) {
        out += c;
        out += text[++i];
        continue;
      }
      if (c == '"') in_string = false;
      out += c;
      continue;
    }
    if (c == '"') in_string = true;
    bool replaced = false;
    for (const NonFinite& n : kNonFinite) {
      const size_t end = i + n.word.size();
      if (text.substr(i, n.word.size()) == n.word &&
          (end == text.size() || is_delimiter(text[end]))) {
        out += fmt::format("\"{}\"", n.marker);
        i = end - 1;
        replaced = found = true;
        break;
      }
    }
    if (!replaced) out += c;
  }
  if (!found) return std::nullopt;
  return out;
}

void restore_non_finite(Json& value) {
  if (value.is_structured()) {
    for (Json& child : value) restore_non_finite(child);
    return;
  }
  if (!value.is_string()) return;
  const std::string& s = value.get_ref<const std::string&>();
  for (const NonFinite& n : kNonFinite) {
    if (s.size() == n.word.size() + 3 && s.compare(3, std::string::npos, n.word) == 0 &&
        s.compare(0, 3, "\xEF\xB7\x90") == 0) {
      value = n.value;
      return;
    }
  }
}

Json parse_checked(std::string_view text);

}  // namespace

Json parse_json_text(std::string_view text) {
  if (const std::optional<std::string> quoted = quote_non_finite(text)) {
    Json value = parse_checked(*quoted);
    restore_non_finite(value);
    return value;
  }
  return parse_checked(text);
}

namespace {

Json parse_checked(std::string_view text) {
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

}  // namespace

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
