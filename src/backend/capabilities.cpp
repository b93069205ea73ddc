#include "attnkit/backend/capabilities.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace attnkit {

SizeRule SizeRule::list(std::vector<int> values) {
  SizeRule r;
  std::sort(values.begin(), values.end());
  r.exact = std::move(values);
  return r;
}

SizeRule SizeRule::multiple(int n, int min_value, int max_value) {
  SizeRule r;
  r.multiple_of = n;
  r.min = min_value;
  r.max = max_value;
  return r;
}

bool SizeRule::allows(int value) const {
  if (!exact.empty()) return std::find(exact.begin(), exact.end(), value) != exact.end();
  if (value < min || (max > 0 && value > max)) return false;
  return multiple_of <= 1 || value % multiple_of == 0;
}

std::string SizeRule::describe() const {
  if (!exact.empty()) return fmt::format("{}", fmt::join(exact, ", "));
  std::string s =
      multiple_of <= 1 ? std::string("any") : fmt::format("multiples of {}", multiple_of);
  if (min > std::max(1, multiple_of)) s += fmt::format(" from {}", min);
  if (max > 0) s += fmt::format(" up to {}", max);
  return s;
}

std::vector<int> SizeRule::enumerate(int lo, int hi) const {
  std::vector<int> out;
  if (!exact.empty()) {
    for (int v : exact) {
      if (v >= lo && v <= hi) out.push_back(v);
    }
    return out;
  }
  for (int v = std::max(lo, 1); v <= hi; ++v) {
    if (allows(v)) out.push_back(v);
  }
  return out;
}

namespace {

template <typename E>
std::string join_enums(const std::vector<E>& values) {
  std::vector<std::string_view> names;
  names.reserve(values.size());
  for (E v : values) names.push_back(to_string(v));
  return fmt::format("{}", fmt::join(names, ", "));
}

template <typename E>
bool contains(const std::vector<E>& values, E v) {
  return std::find(values.begin(), values.end(), v) != values.end();
}

std::string yes_no(bool b) { return b ? "yes" : "no"; }

std::string cc_string(int cc) { return fmt::format("{}.{}", cc / 10, cc % 10); }

}  // namespace

std::vector<std::pair<std::string, std::string>> BackendCapabilities::describe() const {
  std::vector<std::pair<std::string, std::string>> rows;
  std::string plat(to_string(platform));
  if (platform == PlatformKind::kCuda) {
    plat += fmt::format(" (compute capability {}{})",
                        min_compute_capability ? cc_string(min_compute_capability) + "+" : "any",
                        max_compute_capability ? " to " + cc_string(max_compute_capability) : "");
  }
  rows.emplace_back("platform", plat);
  rows.emplace_back("dtypes", join_enums(dtypes));
  rows.emplace_back("kv_cache_dtypes", join_enums(kv_cache_dtypes));
  rows.emplace_back("head_sizes", head_sizes.describe() +
                                      (separate_v_head_size ? " (V head size may differ)" : ""));
  rows.emplace_back("kernel_block_sizes", kernel_block_sizes.describe());
  rows.emplace_back("preferred_block_size", std::to_string(preferred_block_size));
  rows.emplace_back("attention_types", join_enums(attention_types));
  rows.emplace_back("mla", mla_only ? "only" : yes_no(mla));
  rows.emplace_back("sliding_window", yes_no(sliding_window));
  rows.emplace_back("chunked_local", yes_no(chunked_local));
  rows.emplace_back("sinks", yes_no(sinks));
  rows.emplace_back("sink_tokens", yes_no(sink_tokens));
  rows.emplace_back("state_layer_types", state_layer_types.empty() ? "none (attention layers)"
                                                                   : join_enums(state_layer_types));
  rows.emplace_back("soft_cap", yes_no(soft_cap));
  rows.emplace_back("non_causal", yes_no(non_causal));
  rows.emplace_back("batch_invariant", yes_no(batch_invariant));
  rows.emplace_back("kv_connector", yes_no(kv_connector));
  rows.emplace_back("kv_layout",
                    required_layout ? std::string(to_string(*required_layout)) : "NHD");
  rows.emplace_back("cuda_graphs", to_string(cuda_graphs));
  return rows;
}

const char* to_string(CudaGraphSupport support) {
  switch (support) {
    case CudaGraphSupport::kNever:
      return "never";
    case CudaGraphSupport::kUniformSingleTokenDecode:
      return "uniform_single_token_decode";
    case CudaGraphSupport::kUniformBatch:
      return "uniform_batch";
    case CudaGraphSupport::kAlways:
      return "always";
  }
  return "never";
}

bool block_size_servable(const SizeRule& kernel_sizes, int block_size) {
  if (kernel_sizes.allows(block_size)) return true;
  // Virtual splitting: a cache block may be viewed as several kernel blocks.
  for (int k : kernel_sizes.enumerate(1, block_size - 1)) {
    if (block_size % k == 0) return true;
  }
  return false;
}

std::vector<std::string> validate_capabilities(const BackendCapabilities& caps,
                                               const SelectorConfig& c, const Platform& p) {
  std::vector<std::string> reasons;
  auto add = [&](std::string r) { reasons.push_back(std::move(r)); };

  if (p.kind != caps.platform) {
    add(fmt::format("runs on {}, not on {}", to_string(caps.platform), p.to_string()));
  } else if (p.kind == PlatformKind::kCuda) {
    const int cc = p.compute_capability();
    if (caps.min_compute_capability && cc < caps.min_compute_capability) {
      add(fmt::format("compute capability {} is below the minimum {}", cc_string(cc),
                      cc_string(caps.min_compute_capability)));
    }
    if (caps.max_compute_capability && cc > caps.max_compute_capability) {
      add(fmt::format("compute capability {} is above the maximum {}", cc_string(cc),
                      cc_string(caps.max_compute_capability)));
    }
  }
  if (c.state.has_value() || !caps.state_layer_types.empty()) {
    // A state layer asks for its type and compute dtype only.
    if (!c.state) {
      add(fmt::format("serves only state layers ({}), and this layer is attention",
                      join_enums(caps.state_layer_types)));
      return reasons;
    }
    if (caps.state_layer_types.empty()) {
      add(fmt::format("serves attention layers, not state layers ({})", to_string(c.state->type)));
      return reasons;
    }
    if (!contains(caps.state_layer_types, c.state->type)) {
      add(fmt::format("state layer type {} not supported (supported: {})", to_string(c.state->type),
                      join_enums(caps.state_layer_types)));
    }
    if (!contains(caps.dtypes, c.dtype)) {
      add(fmt::format("dtype {} not supported (supported: {})", to_string(c.dtype),
                      join_enums(caps.dtypes)));
    }
    return reasons;
  }
  if (!contains(caps.dtypes, c.dtype)) {
    add(fmt::format("dtype {} not supported (supported: {})", to_string(c.dtype),
                    join_enums(caps.dtypes)));
  }
  // Selection hands over a concrete KV dtype; a hand-built config may still say kAuto.
  const KvCacheDType kv = resolve_kv_cache_dtype(c.kv_cache_dtype, c.dtype);
  const KvCacheDType own = resolve_kv_cache_dtype(KvCacheDType::kAuto, c.dtype);
  if (kv != own && !contains(caps.kv_cache_dtypes, kv)) {
    std::vector<KvCacheDType> supported{own};
    for (KvCacheDType listed : caps.kv_cache_dtypes) {
      if (listed != own) supported.push_back(listed);
    }
    add(fmt::format("kv_cache_dtype {} not supported with dtype {} (supported: {})", to_string(kv),
                    to_string(c.dtype), join_enums(supported)));
  }
  if (!caps.head_sizes.allows(c.head_size)) {
    add(fmt::format("head_size {} not supported (supported: {})", c.head_size,
                    caps.head_sizes.describe()));
  }
  if (c.head_size_v != c.head_size && !caps.separate_v_head_size) {
    add(fmt::format("head_size_v {} differs from head_size {}, which is not supported",
                    c.head_size_v, c.head_size));
  }
  if (c.block_size && !block_size_servable(caps.kernel_block_sizes, *c.block_size)) {
    add(fmt::format("block_size {} not supported (supported: {})", *c.block_size,
                    caps.kernel_block_sizes.describe()));
  }
  const bool type_ok = contains(caps.attention_types, c.attn_type);
  if (!type_ok) {
    add(fmt::format("attention type {} not supported (supported: {})", to_string(c.attn_type),
                    join_enums(caps.attention_types)));
  }
  if (c.use_mla && !caps.mla) add("MLA not supported");
  if (!c.use_mla && caps.mla_only) add("serves only MLA layers, and this layer is not MLA");
  if (c.sliding_window && !caps.sliding_window) {
    add(fmt::format("sliding window ({}) not supported", *c.sliding_window));
  }
  if (c.chunk_size && !caps.chunked_local) {
    add(fmt::format("chunked local attention (chunk {}) not supported", *c.chunk_size));
  }
  if (c.has_sinks && !caps.sinks) add("attention sinks not supported");
  if (c.sink_len > 0 && !caps.sink_tokens) {
    add(fmt::format("static sink tokens ({}) not supported", c.sink_len));
  }
  if (c.soft_cap && !caps.soft_cap) {
    add(fmt::format("logit soft-capping ({}) not supported", *c.soft_cap));
  }
  if (type_ok && !c.is_causal() && !caps.non_causal) {
    add("non-causal (bidirectional) attention not supported");
  }
  if (c.batch_invariant && !caps.batch_invariant) add("batch invariance not supported");
  if (c.kv_connector && !caps.kv_connector) add("KV connector not supported");
  return reasons;
}

}  // namespace attnkit
