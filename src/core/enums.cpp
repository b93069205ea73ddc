#include "attnkit/core/enums.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cctype>

namespace attnkit {
namespace {

// One row per spelling. The first row of each value is its canonical spelling; later rows
// are accepted aliases.
template <typename E>
struct Spelling {
  E value;
  std::string_view text;
};

constexpr Spelling<DType> kDTypes[] = {
    {DType::kFloat32, "float32"}, {DType::kFloat16, "float16"}, {DType::kBFloat16, "bfloat16"},
    {DType::kFloat32, "fp32"},    {DType::kFloat16, "fp16"},    {DType::kBFloat16, "bf16"},
    {DType::kFloat32, "float"},   {DType::kFloat16, "half"},
};
constexpr Spelling<KvCacheDType> kKvCacheDTypes[] = {
    {KvCacheDType::kAuto, "auto"},         {KvCacheDType::kFloat16, "float16"},
    {KvCacheDType::kBFloat16, "bfloat16"}, {KvCacheDType::kFloat32, "float32"},
    {KvCacheDType::kFp8E4M3, "fp8_e4m3"},  {KvCacheDType::kFp8E5M2, "fp8_e5m2"},
    {KvCacheDType::kFp8E4M3, "fp8"},       {KvCacheDType::kFloat16, "fp16"},
    {KvCacheDType::kBFloat16, "bf16"},     {KvCacheDType::kFloat32, "fp32"},
};
constexpr Spelling<AttentionType> kAttentionTypes[] = {
    {AttentionType::kDecoder, "decoder"},
    {AttentionType::kEncoder, "encoder"},
    {AttentionType::kEncoderOnly, "encoder_only"},
    {AttentionType::kEncoderDecoder, "encoder_decoder"},
};
constexpr Spelling<KvCacheKind> kKinds[] = {
    {KvCacheKind::kFullAttention, "full_attention"},
    {KvCacheKind::kSlidingWindow, "sliding_window"},
    {KvCacheKind::kMlaAttention, "mla_attention"},
    {KvCacheKind::kSlidingWindowMla, "sliding_window_mla"},
    {KvCacheKind::kChunkedLocalAttention, "chunked_local_attention"},
    {KvCacheKind::kSinkFullAttention, "sink_full_attention"},
    {KvCacheKind::kEncoderOnlyAttention, "encoder_only_attention"},
    {KvCacheKind::kCrossAttention, "cross_attention"},
    {KvCacheKind::kMamba, "mamba"},
};
constexpr Spelling<StateLayerType> kStateLayerTypes[] = {
    {StateLayerType::kMamba1, "mamba1"},
    {StateLayerType::kMamba2, "mamba2"},
    {StateLayerType::kGatedDeltaNet, "gated_delta_net"},
    {StateLayerType::kKimiDeltaAttention, "kimi_delta_attention"},
    {StateLayerType::kShortConv, "short_conv"},
    {StateLayerType::kLinearAttention, "linear_attention"},
    {StateLayerType::kRgLru, "rg_lru"},
    {StateLayerType::kGatedDeltaNet, "gdn"},
    {StateLayerType::kKimiDeltaAttention, "kda"},
};
constexpr Spelling<KvLayout> kLayouts[] = {{KvLayout::kNHD, "NHD"}, {KvLayout::kHND, "HND"}};
constexpr Spelling<PlatformKind> kPlatformKinds[] = {{PlatformKind::kCpu, "cpu"},
                                                     {PlatformKind::kCuda, "cuda"}};
constexpr Spelling<ScalarType> kScalarTypes[] = {
    {ScalarType::kFloat32, "float32"},   {ScalarType::kFloat16, "float16"},
    {ScalarType::kBFloat16, "bfloat16"}, {ScalarType::kFp8E4M3, "fp8_e4m3"},
    {ScalarType::kFp8E5M2, "fp8_e5m2"},  {ScalarType::kInt32, "int32"},
    {ScalarType::kInt64, "int64"},       {ScalarType::kUInt8, "uint8"},
};

constexpr DType kDTypeValues[] = {DType::kFloat32, DType::kFloat16, DType::kBFloat16};
constexpr KvCacheDType kKvCacheDTypeValues[] = {KvCacheDType::kAuto,     KvCacheDType::kFloat16,
                                                KvCacheDType::kBFloat16, KvCacheDType::kFloat32,
                                                KvCacheDType::kFp8E4M3,  KvCacheDType::kFp8E5M2};
constexpr AttentionType kAttentionTypeValues[] = {AttentionType::kDecoder, AttentionType::kEncoder,
                                                  AttentionType::kEncoderOnly,
                                                  AttentionType::kEncoderDecoder};
constexpr KvCacheKind kKindValues[] = {KvCacheKind::kFullAttention,
                                       KvCacheKind::kSlidingWindow,
                                       KvCacheKind::kMlaAttention,
                                       KvCacheKind::kSlidingWindowMla,
                                       KvCacheKind::kChunkedLocalAttention,
                                       KvCacheKind::kSinkFullAttention,
                                       KvCacheKind::kEncoderOnlyAttention,
                                       KvCacheKind::kCrossAttention,
                                       KvCacheKind::kMamba};
constexpr StateLayerType kStateLayerTypeValues[] = {
    StateLayerType::kMamba1,        StateLayerType::kMamba2,
    StateLayerType::kGatedDeltaNet, StateLayerType::kKimiDeltaAttention,
    StateLayerType::kShortConv,     StateLayerType::kLinearAttention,
    StateLayerType::kRgLru};
constexpr KvLayout kLayoutValues[] = {KvLayout::kNHD, KvLayout::kHND};
constexpr PlatformKind kPlatformKindValues[] = {PlatformKind::kCpu, PlatformKind::kCuda};
constexpr ScalarType kScalarTypeValues[] = {
    ScalarType::kFloat32, ScalarType::kFloat16, ScalarType::kBFloat16, ScalarType::kFp8E4M3,
    ScalarType::kFp8E5M2, ScalarType::kInt32,   ScalarType::kInt64,    ScalarType::kUInt8};

template <typename E>
struct Table;
// E is a type: the check takes `Spelling<E>>` for an expression that needs parentheses.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define ATTNKIT_ENUM_TABLE(E, spellings, values, what_name)        \
  template <>                                                      \
  struct Table<E> {                                                \
    static constexpr std::span<const Spelling<E>> rows{spellings}; \
    static constexpr std::span<const E> all{values};               \
    static constexpr std::string_view what = what_name;            \
  };
// NOLINTEND(bugprone-macro-parentheses)
ATTNKIT_ENUM_TABLE(DType, kDTypes, kDTypeValues, "dtype")
ATTNKIT_ENUM_TABLE(KvCacheDType, kKvCacheDTypes, kKvCacheDTypeValues, "KV cache dtype")
ATTNKIT_ENUM_TABLE(AttentionType, kAttentionTypes, kAttentionTypeValues, "attention type")
ATTNKIT_ENUM_TABLE(KvCacheKind, kKinds, kKindValues, "KV cache group kind")
ATTNKIT_ENUM_TABLE(StateLayerType, kStateLayerTypes, kStateLayerTypeValues, "state layer type")
ATTNKIT_ENUM_TABLE(KvLayout, kLayouts, kLayoutValues, "KV layout")
ATTNKIT_ENUM_TABLE(PlatformKind, kPlatformKinds, kPlatformKindValues, "platform")
ATTNKIT_ENUM_TABLE(ScalarType, kScalarTypes, kScalarTypeValues, "scalar type")
#undef ATTNKIT_ENUM_TABLE

bool iequals(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}

template <typename E>
std::string_view canonical(E value) {
  for (const auto& row : Table<E>::rows) {
    if (row.value == value) return row.text;
  }
  return "?";
}

}  // namespace

template <typename E>
E parse(std::string_view text) {
  for (const auto& row : Table<E>::rows) {
    if (iequals(row.text, text)) return row.value;
  }
  throw Error(ErrorCode::kNotFound, fmt::format("Unknown {} '{}'. Valid values are: {}",
                                                Table<E>::what, text, valid_spellings<E>()));
}

template <typename E>
std::span<const E> all_values() {
  return Table<E>::all;
}

template <typename E>
std::string valid_spellings() {
  std::vector<std::string_view> names;
  for (E value : Table<E>::all) names.push_back(canonical(value));
  std::sort(names.begin(), names.end());
  return fmt::format("{}", fmt::join(names, ", "));
}

#define ATTNKIT_INSTANTIATE(E)                             \
  template ATTNKIT_API E parse<E>(std::string_view);       \
  template ATTNKIT_API std::span<const E> all_values<E>(); \
  template ATTNKIT_API std::string valid_spellings<E>();   \
  std::string_view to_string(E v) { return canonical(v); }
ATTNKIT_INSTANTIATE(DType)
ATTNKIT_INSTANTIATE(KvCacheDType)
ATTNKIT_INSTANTIATE(AttentionType)
ATTNKIT_INSTANTIATE(KvCacheKind)
ATTNKIT_INSTANTIATE(StateLayerType)
ATTNKIT_INSTANTIATE(KvLayout)
ATTNKIT_INSTANTIATE(PlatformKind)
ATTNKIT_INSTANTIATE(ScalarType)
#undef ATTNKIT_INSTANTIATE

size_t size_of(ScalarType t) {
  switch (t) {
    case ScalarType::kInt64:
      return 8;
    case ScalarType::kFloat32:
    case ScalarType::kInt32:
      return 4;
    case ScalarType::kFloat16:
    case ScalarType::kBFloat16:
      return 2;
    case ScalarType::kFp8E4M3:
    case ScalarType::kFp8E5M2:
    case ScalarType::kUInt8:
      return 1;
  }
  return 0;
}

ScalarType scalar_type_of(DType d) {
  switch (d) {
    case DType::kFloat32:
      return ScalarType::kFloat32;
    case DType::kFloat16:
      return ScalarType::kFloat16;
    case DType::kBFloat16:
      return ScalarType::kBFloat16;
  }
  return ScalarType::kFloat32;
}

KvCacheDType resolve_kv_cache_dtype(KvCacheDType kv, DType compute) {
  if (kv != KvCacheDType::kAuto) return kv;
  switch (compute) {
    case DType::kFloat32:
      return KvCacheDType::kFloat32;
    case DType::kFloat16:
      return KvCacheDType::kFloat16;
    case DType::kBFloat16:
      return KvCacheDType::kBFloat16;
  }
  return KvCacheDType::kBFloat16;
}

ScalarType scalar_type_of(KvCacheDType kv, DType compute) {
  switch (resolve_kv_cache_dtype(kv, compute)) {
    case KvCacheDType::kFloat16:
      return ScalarType::kFloat16;
    case KvCacheDType::kBFloat16:
      return ScalarType::kBFloat16;
    case KvCacheDType::kFloat32:
      return ScalarType::kFloat32;
    case KvCacheDType::kFp8E4M3:
      return ScalarType::kFp8E4M3;
    case KvCacheDType::kFp8E5M2:
      return ScalarType::kFp8E5M2;
    case KvCacheDType::kAuto:
      break;  // resolved above
  }
  return scalar_type_of(compute);
}

size_t kv_cache_dtype_bytes(KvCacheDType kv, DType compute) {
  return size_of(scalar_type_of(kv, compute));
}

bool is_fp8(KvCacheDType kv) {
  return kv == KvCacheDType::kFp8E4M3 || kv == KvCacheDType::kFp8E5M2;
}

}  // namespace attnkit
