#pragma once
// A registry of fake backends named like the built-ins, with capabilities chosen so that
// every selector path can be reached:
//   CPU_FLASH   cpu, decoder only, head sizes 64/128/256, kernel block size 16 (so a user
//               block size of 24 rules it out), sliding window, no sinks
//   REFERENCE   cpu, everything
//   CUDA_MLA    cuda 8.0+, MLA only (head size 576, V 512)
//   CUDA_FLASH  cuda 8.0 to 9.0, decoder, head sizes multiples of 32 up to 256, window
//   CUDA_PAGED  cuda 8.0+, everything but MLA

#include <gtest/gtest.h>

#include <string>

#include "attnkit/registry/registry.h"
#include "support/fake_backend.h"

namespace attnkit::testing {

inline BackendCapabilities cpu_flash_caps() {
  BackendCapabilities caps = basic_caps(PlatformKind::kCpu);
  caps.head_sizes = SizeRule::list({64, 128, 256});
  caps.kernel_block_sizes = SizeRule::list({16});
  caps.sliding_window = true;
  return caps;
}

inline BackendCapabilities cuda_mla_caps() {
  BackendCapabilities caps = basic_caps(PlatformKind::kCuda);
  caps.dtypes = {DType::kFloat16, DType::kBFloat16};
  caps.head_sizes = SizeRule::list({576});
  caps.separate_v_head_size = true;
  caps.mla = caps.mla_only = true;
  return caps;
}

inline BackendCapabilities cuda_flash_caps() {
  BackendCapabilities caps = basic_caps(PlatformKind::kCuda);
  caps.dtypes = {DType::kFloat16, DType::kBFloat16};
  caps.max_compute_capability = 90;
  caps.head_sizes = SizeRule::multiple(32, 32, 256);
  caps.sliding_window = true;
  return caps;
}

inline BackendCapabilities cuda_paged_caps() {
  BackendCapabilities caps = full_caps(PlatformKind::kCuda);
  caps.mla = false;
  return caps;
}

// Registers the five fakes into `registry` (empty, or with the real built-ins replaced).
inline void register_fake_builtins(BackendRegistry& registry) {
  registry.register_backend("CPU_FLASH", fake_factory("CPU_FLASH", cpu_flash_caps()));
  registry.register_backend("REFERENCE", fake_factory("REFERENCE", full_caps()));
  registry.register_backend("CUDA_MLA", fake_factory("CUDA_MLA", cuda_mla_caps()));
  registry.register_backend("CUDA_FLASH", fake_factory("CUDA_FLASH", cuda_flash_caps()));
  registry.register_backend("CUDA_PAGED", fake_factory("CUDA_PAGED", cuda_paged_caps()));
}

// A CPU platform as the selector sees it (local).
inline Platform cpu() {
  Platform p;
  p.kind = PlatformKind::kCpu;
  p.is_local = true;
  return p;
}

// A CUDA platform; described (not local) unless `local`.
inline Platform cuda(int major, int minor, bool local = false) {
  Platform p;
  p.kind = PlatformKind::kCuda;
  p.cc_major = major;
  p.cc_minor = minor;
  p.is_local = local;
  return p;
}

inline SelectorConfig decoder(int head_size = 128) {
  SelectorConfig c;
  c.head_size = c.head_size_v = head_size;
  return c;
}

inline SelectorConfig mla_layer() {
  SelectorConfig c;
  c.head_size = 576;
  c.head_size_v = 512;
  c.use_mla = true;
  c.mla_rope_dim = 64;
  return c;
}

// The message of the Error `fn` throws (fails the test when it throws nothing).
template <typename Fn>
std::string error_message(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected attnkit::Error";
  return {};
}

}  // namespace attnkit::testing
