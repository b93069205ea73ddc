#pragma once
// Helpers shared by the plugin tests. The fixture libraries' paths come from
// tests/plugin/CMakeLists.txt as ATTNKIT_PLUGIN_FIXTURE_<MODE> macros.

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>

#include "attnkit/core/error.h"

namespace attnkit::testing {

// The Error `fn` throws (fails the test when it throws nothing or something else).
template <typename Fn>
Error plugin_error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected attnkit::Error";
  return Error(ErrorCode::kInternal, "(nothing thrown)");
}

// True while the library at `path` is mapped into this process (asks without loading it).
inline bool library_is_loaded(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return false;
  dlclose(handle);  // RTLD_NOLOAD took a reference; give it back
  return true;
}

}  // namespace attnkit::testing
