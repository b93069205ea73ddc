#include "attnkit/core/error.h"

#include <cstdio>
#include <cstdlib>

namespace attnkit {

std::string_view to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument:
      return "invalid_argument";
    case ErrorCode::kNotFound:
      return "not_found";
    case ErrorCode::kUnsupported:
      return "unsupported";
    case ErrorCode::kOutOfMemory:
      return "out_of_memory";
    case ErrorCode::kPluginError:
      return "plugin_error";
    case ErrorCode::kInternal:
      return "internal";
  }
  return "unknown";
}

Error::Error(ErrorCode code, const std::string& message)
    : std::runtime_error(message), code_(code) {}

void check_failed(const char* expr, const char* file, int line, std::string_view msg) {
  std::fprintf(stderr, "attnkit internal error at %s:%d: check '%s' failed: %.*s\n", file, line,
               expr, static_cast<int>(msg.size()), msg.data());
  std::abort();
}

}  // namespace attnkit
