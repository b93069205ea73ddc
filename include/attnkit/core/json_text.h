#pragma once
// Parsing JSON that users hand to attnkit (a model's config.json, an attention config)
// with the limits every such document gets, so that a hostile or broken file fails with a
// message instead of a crash or a silent surprise:
//   - nesting at most kMaxJsonDepth arrays/objects deep (a value nested 100000 deep
//     would otherwise overflow the stack in every recursive walk, message building
//     included);
//   - no key twice in one object (nlohmann keeps the last value silently);
//   - no NUL byte (text after it would be ignored by tools that read C strings);
//   - the text is one complete JSON value with nothing after it, numbers fit a double,
//     strings are valid UTF-8 (nlohmann's own checks).
// Python's json module writes non-finite floats as the bare words NaN, Infinity and
// -Infinity, and published config.json files carry them (Nemotron-H's time_step_limit is
// [0.0, Infinity]); they are read as those float values, as transformers reads them.

#include <cstddef>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

namespace attnkit {

// Real configs nest 3 or 4 levels deep (a model's rope_scaling inside text_config).
inline constexpr int kMaxJsonDepth = 64;

// What parse_json_text() throws: the reason, with the line and column or the key's path
// where there is one ("duplicate key 'backend' in the top-level object"). Callers prefix
// the document it came from.
class JsonTextError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

nlohmann::json parse_json_text(std::string_view text);

// A document's file read whole, refused with an Error naming `what` and the path when it
// is missing (kNotFound), a directory, not a regular file (a FIFO or a device would block
// or never end), unreadable, or larger than kMaxDocumentBytes.
inline constexpr size_t kMaxDocumentBytes = size_t{64} << 20;
std::string read_document(const std::filesystem::path& path, std::string_view what);

// A value for an error message, cut to about `max_chars` characters ("[1,2,3,4,...").
// Invalid UTF-8 in strings is replaced, so the message itself can always be printed.
std::string json_excerpt(const nlohmann::json& value, size_t max_chars = 60);

}  // namespace attnkit
