// libFuzzer entry for the model config property (properties/model_config_property.h).
// A PropertyViolation or any exception other than attnkit::Error aborts: that is a find.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "properties/model_config_property.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    attnkit::fuzz::check_model_config(std::string_view(reinterpret_cast<const char*>(data), size));
  } catch (const attnkit::fuzz::PropertyViolation& e) {
    std::fprintf(stderr, "%s\n", e.what());
    std::abort();
  }
  return 0;
}
