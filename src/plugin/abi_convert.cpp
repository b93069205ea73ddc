#include "plugin/abi_convert.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <utility>

namespace attnkit::plugin {
namespace {

// One row per value: the C code of plugin_abi.h and the C++ enumerator. Explicit tables
// (not casts) so the ABI's numbering never silently follows a reordered C++ enum.

constexpr std::pair<int32_t, DType> kDTypes[] = {
    {ATTNKIT_DTYPE_FLOAT32, DType::kFloat32},
    {ATTNKIT_DTYPE_FLOAT16, DType::kFloat16},
    {ATTNKIT_DTYPE_BFLOAT16, DType::kBFloat16},
};
constexpr std::pair<int32_t, KvCacheDType> kKvDTypes[] = {
    {ATTNKIT_KV_DTYPE_AUTO, KvCacheDType::kAuto},
    {ATTNKIT_KV_DTYPE_FLOAT16, KvCacheDType::kFloat16},
    {ATTNKIT_KV_DTYPE_BFLOAT16, KvCacheDType::kBFloat16},
    {ATTNKIT_KV_DTYPE_FLOAT32, KvCacheDType::kFloat32},
    {ATTNKIT_KV_DTYPE_FP8_E4M3, KvCacheDType::kFp8E4M3},
    {ATTNKIT_KV_DTYPE_FP8_E5M2, KvCacheDType::kFp8E5M2},
};
constexpr std::pair<int32_t, AttentionType> kAttnTypes[] = {
    {ATTNKIT_ATTN_DECODER, AttentionType::kDecoder},
    {ATTNKIT_ATTN_ENCODER, AttentionType::kEncoder},
    {ATTNKIT_ATTN_ENCODER_ONLY, AttentionType::kEncoderOnly},
    {ATTNKIT_ATTN_ENCODER_DECODER, AttentionType::kEncoderDecoder},
};
constexpr std::pair<int32_t, KvCacheKind> kKinds[] = {
    {ATTNKIT_KIND_FULL_ATTENTION, KvCacheKind::kFullAttention},
    {ATTNKIT_KIND_SLIDING_WINDOW, KvCacheKind::kSlidingWindow},
    {ATTNKIT_KIND_MLA_ATTENTION, KvCacheKind::kMlaAttention},
    {ATTNKIT_KIND_SLIDING_WINDOW_MLA, KvCacheKind::kSlidingWindowMla},
    {ATTNKIT_KIND_CHUNKED_LOCAL_ATTENTION, KvCacheKind::kChunkedLocalAttention},
    {ATTNKIT_KIND_SINK_FULL_ATTENTION, KvCacheKind::kSinkFullAttention},
    {ATTNKIT_KIND_ENCODER_ONLY_ATTENTION, KvCacheKind::kEncoderOnlyAttention},
    {ATTNKIT_KIND_CROSS_ATTENTION, KvCacheKind::kCrossAttention},
};
constexpr std::pair<int32_t, KvLayout> kLayouts[] = {
    {ATTNKIT_LAYOUT_NHD, KvLayout::kNHD},
    {ATTNKIT_LAYOUT_HND, KvLayout::kHND},
};
constexpr std::pair<int32_t, PlatformKind> kPlatforms[] = {
    {ATTNKIT_PLATFORM_CPU, PlatformKind::kCpu},
    {ATTNKIT_PLATFORM_CUDA, PlatformKind::kCuda},
};
constexpr std::pair<int32_t, ScalarType> kScalars[] = {
    {ATTNKIT_SCALAR_FLOAT32, ScalarType::kFloat32},
    {ATTNKIT_SCALAR_FLOAT16, ScalarType::kFloat16},
    {ATTNKIT_SCALAR_BFLOAT16, ScalarType::kBFloat16},
    {ATTNKIT_SCALAR_FP8_E4M3, ScalarType::kFp8E4M3},
    {ATTNKIT_SCALAR_FP8_E5M2, ScalarType::kFp8E5M2},
    {ATTNKIT_SCALAR_INT32, ScalarType::kInt32},
    {ATTNKIT_SCALAR_INT64, ScalarType::kInt64},
    {ATTNKIT_SCALAR_UINT8, ScalarType::kUInt8},
};

template <typename E, size_t N>
int32_t code_of(const std::pair<int32_t, E> (&table)[N], E value) {
  for (const auto& [code, v] : table) {
    if (v == value) return code;
  }
  ATTNKIT_CHECK(false, "enum value missing from the plugin ABI table");
  return -1;
}

template <typename E, size_t N>
std::optional<E> value_of(const std::pair<int32_t, E> (&table)[N], int32_t code) {
  for (const auto& [c, v] : table) {
    if (c == code) return v;
  }
  return std::nullopt;
}

// The valid codes of a table, e.g. "0 (float32), 1 (float16), 2 (bfloat16)".
template <typename E, size_t N>
std::string valid_codes(const std::pair<int32_t, E> (&table)[N]) {
  std::string s;
  for (const auto& [c, v] : table) {
    if (!s.empty()) s += ", ";
    s += fmt::format("{} ({})", c, to_string(v));
  }
  return s;
}

template <typename E, size_t N>
E decode(const std::pair<int32_t, E> (&table)[N], int32_t code, std::string_view backend,
         std::string_view field) {
  if (auto v = value_of(table, code)) return *v;
  throw Error(ErrorCode::kPluginError,
              fmt::format("plugin backend {}: capabilities.{} = {} is not a valid code (valid: {})",
                          backend, field, code, valid_codes(table)));
}

template <typename E, size_t N>
std::vector<E> decode_list(const std::pair<int32_t, E> (&table)[N], const int32_t* codes,
                           uint32_t count, std::string_view backend, std::string_view field) {
  if (count > 0 && codes == nullptr) {
    throw Error(ErrorCode::kPluginError,
                fmt::format("plugin backend {}: capabilities.{} is NULL but its count is {}",
                            backend, field, count));
  }
  std::vector<E> out;
  for (uint32_t i = 0; i < count; ++i) {
    out.push_back(decode(table, codes[i], backend, fmt::format("{}[{}]", field, i)));
  }
  return out;
}

SizeRule size_rule_from_c(const AttnkitSizeRule* rule, std::string_view backend,
                          std::string_view field) {
  if (rule == nullptr) return SizeRule::any();
  check_struct_header(fmt::format("plugin backend {}: capabilities.{}", backend, field),
                      rule->struct_size, rule->abi_version, kSizeRuleV1Size);
  auto bad = [&](const std::string& what) {
    return Error(ErrorCode::kPluginError,
                 fmt::format("plugin backend {}: capabilities.{}: {}", backend, field, what));
  };
  if (rule->num_exact > 0) {
    if (rule->exact == nullptr)
      throw bad(fmt::format("exact is NULL but num_exact is {}", rule->num_exact));
    std::vector<int> values(rule->exact, rule->exact + rule->num_exact);
    for (int v : values) {
      if (v <= 0) throw bad(fmt::format("exact value {} is not positive", v));
    }
    return SizeRule::list(std::move(values));
  }
  if (rule->multiple_of < 1) throw bad(fmt::format("multiple_of {} is below 1", rule->multiple_of));
  if (rule->max != 0 && rule->max < rule->min) {
    throw bad(fmt::format("max {} is below min {}", rule->max, rule->min));
  }
  return SizeRule::multiple(rule->multiple_of, std::max(1, rule->min), rule->max);
}

}  // namespace

void check_struct_header(std::string_view what, uint32_t struct_size, uint32_t abi_version,
                         size_t min_size) {
  if (struct_size < min_size) {
    throw Error(ErrorCode::kPluginError,
                fmt::format("{}: struct_size {} is smaller than the version-1 size {}", what,
                            struct_size, min_size));
  }
  if (abi_version < ATTNKIT_PLUGIN_ABI_MIN_VERSION || abi_version > ATTNKIT_PLUGIN_ABI_VERSION) {
    throw Error(
        ErrorCode::kPluginError,
        fmt::format("{}: abi_version {} is outside the versions {} to {} this attnkit "
                    "reads",
                    what, abi_version, ATTNKIT_PLUGIN_ABI_MIN_VERSION, ATTNKIT_PLUGIN_ABI_VERSION));
  }
}

int32_t to_c(DType v) { return code_of(kDTypes, v); }
int32_t to_c(KvCacheDType v) { return code_of(kKvDTypes, v); }

int32_t kv_cache_dtype_to_c(KvCacheDType kv, DType dtype) {
  return to_c(kv == resolve_kv_cache_dtype(KvCacheDType::kAuto, dtype) ? KvCacheDType::kAuto : kv);
}
int32_t to_c(AttentionType v) { return code_of(kAttnTypes, v); }
int32_t to_c(KvCacheKind v) { return code_of(kKinds, v); }
int32_t to_c(KvLayout v) { return code_of(kLayouts, v); }
int32_t to_c(PlatformKind v) { return code_of(kPlatforms, v); }
int32_t to_c(ScalarType v) { return code_of(kScalars, v); }

std::string status_code_name(int32_t code) {
  switch (code) {
    case ATTNKIT_STATUS_INVALID_ARGUMENT:
      return "invalid argument";
    case ATTNKIT_STATUS_UNSUPPORTED:
      return "unsupported";
    case ATTNKIT_STATUS_OUT_OF_MEMORY:
      return "out of memory";
    case ATTNKIT_STATUS_INTERNAL:
      return "internal error";
    default:
      return fmt::format("status {}", code);
  }
}

BackendCapabilities capabilities_from_c(const AttnkitCapabilities& c, std::string_view backend) {
  check_struct_header(fmt::format("plugin backend {}: capabilities", backend), c.struct_size,
                      c.abi_version, kCapabilitiesV1Size);
  BackendCapabilities caps;
  caps.platform = decode(kPlatforms, c.platform, backend, "platform");
  caps.min_compute_capability = c.min_compute_capability;
  caps.max_compute_capability = c.max_compute_capability;
  caps.dtypes = decode_list(kDTypes, c.dtypes, c.num_dtypes, backend, "dtypes");
  if (caps.dtypes.empty()) {
    throw Error(ErrorCode::kPluginError,
                fmt::format("plugin backend {}: capabilities.dtypes is empty", backend));
  }
  // The ABI lists the KV dtypes besides "auto" (the compute dtype's own), which every
  // backend accepts; so do attnkit's capabilities (BackendCapabilities::kv_cache_dtypes).
  caps.kv_cache_dtypes.clear();
  for (KvCacheDType kv : decode_list(kKvDTypes, c.kv_cache_dtypes, c.num_kv_cache_dtypes, backend,
                                     "kv_cache_dtypes")) {
    if (kv != KvCacheDType::kAuto) caps.kv_cache_dtypes.push_back(kv);
  }
  caps.head_sizes = size_rule_from_c(c.head_sizes, backend, "head_sizes");
  caps.separate_v_head_size = c.separate_v_head_size != 0;
  caps.kernel_block_sizes = size_rule_from_c(c.kernel_block_sizes, backend, "kernel_block_sizes");
  if (c.preferred_block_size <= 0) {
    throw Error(ErrorCode::kPluginError,
                fmt::format("plugin backend {}: capabilities.preferred_block_size {} is not "
                            "positive",
                            backend, c.preferred_block_size));
  }
  caps.preferred_block_size = c.preferred_block_size;
  caps.attention_types =
      decode_list(kAttnTypes, c.attention_types, c.num_attention_types, backend, "attention_types");
  if (caps.attention_types.empty()) {
    throw Error(ErrorCode::kPluginError,
                fmt::format("plugin backend {}: capabilities.attention_types is empty", backend));
  }
  caps.mla = c.mla != 0;
  caps.mla_only = c.mla_only != 0;
  caps.sliding_window = c.sliding_window != 0;
  caps.chunked_local = c.chunked_local != 0;
  caps.sinks = c.sinks != 0;
  caps.soft_cap = c.soft_cap != 0;
  caps.non_causal = c.non_causal != 0;
  caps.batch_invariant = c.batch_invariant != 0;
  caps.kv_connector = c.kv_connector != 0;
  if (c.required_layout != ATTNKIT_LAYOUT_ANY) {
    caps.required_layout = decode(kLayouts, c.required_layout, backend, "required_layout");
  }
  return caps;
}

AttnkitSelectorConfig to_c(const SelectorConfig& s) {
  AttnkitSelectorConfig c{};
  c.struct_size = sizeof(c);
  c.abi_version = ATTNKIT_PLUGIN_ABI_VERSION;
  c.head_size = s.head_size;
  c.head_size_v = s.head_size_v;
  c.num_heads = s.num_heads;
  c.num_kv_heads = s.num_kv_heads;
  c.dtype = to_c(s.dtype);
  c.kv_cache_dtype = kv_cache_dtype_to_c(s.kv_cache_dtype, s.dtype);
  c.block_size = s.block_size.value_or(0);
  c.use_mla = s.use_mla;
  c.mla_rope_dim = s.mla_rope_dim;
  c.has_sinks = s.has_sinks;
  c.sliding_window = s.sliding_window.value_or(0);
  c.chunk_size = s.chunk_size.value_or(0);
  c.soft_cap = s.soft_cap.value_or(0.0f);
  c.attn_type = to_c(s.attn_type);
  c.batch_invariant = s.batch_invariant;
  c.kv_connector = s.kv_connector;
  return c;
}

AttnkitPlatform to_c(const Platform& p) {
  AttnkitPlatform c{};
  c.struct_size = sizeof(c);
  c.abi_version = ATTNKIT_PLUGIN_ABI_VERSION;
  c.kind = to_c(p.kind);
  c.cc_major = p.cc_major;
  c.cc_minor = p.cc_minor;
  c.is_local = p.is_local;
  const std::pair<bool, uint32_t> bits[] = {
      {p.cpu.avx2, ATTNKIT_CPU_AVX2},
      {p.cpu.fma, ATTNKIT_CPU_FMA},
      {p.cpu.f16c, ATTNKIT_CPU_F16C},
      {p.cpu.avx512f, ATTNKIT_CPU_AVX512F},
      {p.cpu.avx512bw, ATTNKIT_CPU_AVX512BW},
      {p.cpu.avx512vl, ATTNKIT_CPU_AVX512VL},
      {p.cpu.avx512dq, ATTNKIT_CPU_AVX512DQ},
      {p.cpu.avx512_bf16, ATTNKIT_CPU_AVX512_BF16},
      {p.cpu.avx512_fp16, ATTNKIT_CPU_AVX512_FP16},
  };
  for (const auto& [present, bit] : bits) {
    if (present) c.cpu_features |= bit;
  }
  c.device_name = p.device_name.c_str();
  return c;
}

AttnkitLayerParams to_c(const AttentionLayerParams& l) {
  AttnkitLayerParams c{};
  c.struct_size = sizeof(c);
  c.abi_version = ATTNKIT_PLUGIN_ABI_VERSION;
  c.layer_index = l.layer_index;
  c.kind = to_c(l.kind);
  c.attn_type = to_c(l.attn_type);
  c.num_heads = l.num_heads;
  c.num_kv_heads = l.num_kv_heads;
  c.head_size = l.head_size;
  c.head_size_v = l.head_size_v;
  c.scale = l.scale;
  c.sliding_window = l.sliding_window;
  c.chunk_size = l.chunk_size;
  c.soft_cap = l.soft_cap;
  c.sinks = l.sinks.empty() ? nullptr : l.sinks.data();
  c.num_sinks = static_cast<uint32_t>(l.sinks.size());
  c.dtype = to_c(l.dtype);
  c.kv_cache_dtype = kv_cache_dtype_to_c(l.kv_cache_dtype, l.dtype);
  c.k_scale = l.k_scale;
  c.v_scale = l.v_scale;
  c.use_mla = l.use_mla;
  c.mla_rope_dim = l.mla_rope_dim;
  return c;
}

AttnkitKvCacheSpec to_c(const KvCacheSpec& s) {
  AttnkitKvCacheSpec c{};
  c.struct_size = sizeof(c);
  c.abi_version = ATTNKIT_PLUGIN_ABI_VERSION;
  c.kind = to_c(s.kind);
  c.block_size = s.block_size;
  c.num_kv_heads = s.num_kv_heads;
  c.head_size = s.head_size;
  c.head_size_v = s.head_size_v;
  c.dtype = to_c(s.dtype);
  c.sliding_window = s.sliding_window;
  c.chunk_size = s.chunk_size;
  c.max_encoder_len = s.max_encoder_len;
  return c;
}

AttnkitCommonMetadata to_c(const CommonAttentionMetadata& m) {
  AttnkitCommonMetadata c{};
  c.struct_size = sizeof(c);
  c.abi_version = ATTNKIT_PLUGIN_ABI_VERSION;
  c.num_reqs = m.num_reqs;
  c.num_actual_tokens = m.num_actual_tokens;
  c.query_start_loc = m.query_start_loc.empty() ? nullptr : m.query_start_loc.data();
  c.seq_lens = m.seq_lens.empty() ? nullptr : m.seq_lens.data();
  c.block_table = m.block_table.empty() ? nullptr : m.block_table.data();
  c.max_blocks_per_req = m.max_blocks_per_req;
  c.block_size = m.block_size;
  c.slot_mapping = m.slot_mapping.empty() ? nullptr : m.slot_mapping.data();
  c.max_query_len = m.max_query_len;
  c.max_seq_len = m.max_seq_len;
  c.causal = m.causal;
  c.encoder_seq_lens = m.encoder_seq_lens.empty() ? nullptr : m.encoder_seq_lens.data();
  c.null_block_id = m.null_block_id;
  c.num_slots = static_cast<int32_t>(m.slot_mapping.size());
  return c;
}

}  // namespace attnkit::plugin
