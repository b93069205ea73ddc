#pragma once
// A backend's static capabilities: data, not code. validate_capabilities() derives from
// them one reason per unmet requirement; the same record drives kernel choice, so a
// backend never claims what its kernels cannot run.

#include <optional>
#include <string>
#include <vector>

#include "attnkit/backend/selector_config.h"
#include "attnkit/core/enums.h"
#include "attnkit/core/platform.h"

namespace attnkit {

// A set of integers given as an explicit list, or as a rule "multiple of N in [min, max]".
// Used for head sizes and kernel block sizes.
struct SizeRule {
  std::vector<int> exact;  // when non-empty, exactly these values
  int multiple_of = 0;     // when exact is empty: value % multiple_of == 0
  int min = 1;
  int max = 0;  // 0 = unbounded

  static SizeRule list(std::vector<int> values);
  static SizeRule multiple(int n, int min_value = 1, int max_value = 0);
  static SizeRule any() { return multiple(1); }
  bool allows(int value) const;
  // "64, 128, 256" or "multiples of 16 up to 256" or "any"
  std::string describe() const;
  // Concrete values in [lo, hi] this rule allows (for enumerating test cases).
  std::vector<int> enumerate(int lo, int hi) const;
};

struct BackendCapabilities {
  PlatformKind platform = PlatformKind::kCpu;
  // CUDA only: compute capability range as major*10+minor; 0 = unbounded.
  int min_compute_capability = 0;
  int max_compute_capability = 0;

  std::vector<DType> dtypes;
  // Concrete KV-cache dtypes the kernels store besides the compute dtype's own, which is
  // always accepted (what "auto" resolves to: resolve_kv_cache_dtype).
  std::vector<KvCacheDType> kv_cache_dtypes;
  SizeRule head_sizes = SizeRule::any();
  bool separate_v_head_size = false;  // head_size_v may differ from head_size
  SizeRule kernel_block_sizes = SizeRule::any();
  int preferred_block_size = 16;
  std::vector<AttentionType> attention_types{AttentionType::kDecoder};

  bool mla = false;       // serves MLA layers (and only those when mla_only)
  bool mla_only = false;  // serves nothing but MLA layers
  bool sliding_window = false;
  bool chunked_local = false;
  bool sinks = false;
  bool soft_cap = false;
  bool non_causal = false;  // bidirectional attention (encoder, encoder-only, cross)
  bool batch_invariant = false;
  bool kv_connector = false;
  std::optional<KvLayout> required_layout;  // nullopt = NHD by default, either accepted

  // One line per field, for `attnkit backends`.
  std::vector<std::pair<std::string, std::string>> describe() const;
};

// True when a cache block of `block_size` tokens can be served by kernels of these block
// sizes: directly, or viewed as several kernel blocks of a size that divides it.
bool block_size_servable(const SizeRule& kernel_block_sizes, int block_size);

// One reason per unmet requirement of `config` on `platform`, each naming the value and
// what is supported, e.g. "head_size 96 not supported (supported: 64, 128, 256)".
// Checks the platform kind and compute-capability range, not whether this binary carries
// kernels (see AttentionBackend::binary_reason).
std::vector<std::string> validate_capabilities(const BackendCapabilities& caps,
                                               const SelectorConfig& config,
                                               const Platform& platform);

}  // namespace attnkit
