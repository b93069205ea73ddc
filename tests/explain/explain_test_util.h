#pragma once
// A registry of small test backends for the explain tests, so that every outcome
// (automatic choice, per-kind and global choices, rejections, described platforms) can be
// reached whatever real backends the build carries:
//   CPU_FLASH  cpu, decoder only, head sizes 64/128/256, sliding window, no sinks, no MLA,
//              no soft-cap, kernel block size 16, preferred 16
//   REFERENCE  cpu, everything, preferred block size 16
//   CUDA_FLASH cuda 8.0+, decoder, head sizes multiple of 32 up to 256, sliding window,
//              sinks; its binary reason says it is not built into this binary

#include <memory>

#include "attnkit/model/model_loader.h"
#include "attnkit/registry/registry.h"
#include "support/fake_backend.h"

namespace attnkit::testing {

inline BackendCapabilities explain_cpu_flash_caps() {
  BackendCapabilities caps = basic_caps(PlatformKind::kCpu);
  caps.head_sizes = SizeRule::list({64, 128, 256});
  caps.kernel_block_sizes = SizeRule::list({16});
  caps.sliding_window = true;
  return caps;
}

inline BackendCapabilities explain_cuda_flash_caps() {
  BackendCapabilities caps = basic_caps(PlatformKind::kCuda);
  caps.head_sizes = SizeRule::multiple(32, 32, 256);
  caps.sliding_window = true;
  caps.sinks = true;
  return caps;
}

inline void register_explain_backends(BackendRegistry& registry) {
  registry.register_backend("CPU_FLASH", fake_factory("CPU_FLASH", explain_cpu_flash_caps()));
  registry.register_backend("REFERENCE", fake_factory("REFERENCE", full_caps()));
  registry.register_backend("CUDA_FLASH", []() -> std::unique_ptr<AttentionBackend> {
    auto b = std::make_unique<FakeBackend>("CUDA_FLASH", explain_cuda_flash_caps());
    b->with_binary_reason("CUDA kernels are not built into this binary");
    return b;
  });
}

inline Platform test_cpu() {
  Platform p;
  p.kind = PlatformKind::kCpu;
  p.is_local = true;
  return p;
}

inline Platform described_cuda(int major, int minor) {
  Platform p;
  p.kind = PlatformKind::kCuda;
  p.cc_major = major;
  p.cc_minor = minor;
  p.is_local = false;
  return p;
}

}  // namespace attnkit::testing
