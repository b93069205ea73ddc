// libFuzzer entry for the metadata property (properties/metadata_property.h).
// A PropertyViolation or any exception other than attnkit::Error aborts: that is a find.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "properties/metadata_property.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    attnkit::fuzz::check_metadata(data, size);
  } catch (const attnkit::fuzz::PropertyViolation& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::abort();
  }
  return 0;
}
