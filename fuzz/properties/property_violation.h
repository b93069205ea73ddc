#pragma once
// A broken property found by a fuzz target or replayed by a regression test.
#include <stdexcept>
#include <string>

namespace attnkit::fuzz {

struct PropertyViolation : std::logic_error {
  using std::logic_error::logic_error;
};

}  // namespace attnkit::fuzz

#define ATTNKIT_PROPERTY(cond)                                                              \
  do {                                                                                      \
    if (!(cond))                                                                            \
      throw ::attnkit::fuzz::PropertyViolation(std::string("property violated: ") + #cond); \
  } while (false)
