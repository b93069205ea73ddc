#pragma once
// The one exception type for errors a user can cause (bad config, unknown names,
// impossible shapes). Messages name the bad value and list the valid ones. Broken
// internal invariants use ATTNKIT_CHECK, which aborts.

#include <stdexcept>
#include <string>
#include <string_view>

#include "attnkit/export.h"

namespace attnkit {

enum class ErrorCode {
  kInvalidArgument,  // a value the user gave is malformed or out of range
  kNotFound,         // an unknown name (backend, kind, model, file)
  kUnsupported,      // valid input that no backend / kernel here can serve
  kOutOfMemory,      // a pool or device allocation could not be satisfied
  kPluginError,      // a plugin library was rejected or returned an error
  kInternal,         // a bug in attnkit; please report
};

ATTNKIT_API std::string_view to_string(ErrorCode code);

class ATTNKIT_API Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message);
  ErrorCode code() const { return code_; }

 private:
  ErrorCode code_;
};

// Aborts with file:line when an internal invariant is broken (never for user input).
[[noreturn]] void check_failed(const char* expr, const char* file, int line, std::string_view msg);

}  // namespace attnkit

#define ATTNKIT_CHECK(cond, msg)                                          \
  do {                                                                    \
    if (!(cond)) ::attnkit::check_failed(#cond, __FILE__, __LINE__, msg); \
  } while (false)
