#include "attnkit/core/enums.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <string>
#include <vector>

namespace attnkit {
namespace {

using ::testing::HasSubstr;

std::string upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

template <typename E>
class EnumTest : public ::testing::Test {};

using AllEnums = ::testing::Types<DType, KvCacheDType, AttentionType, KvCacheKind, KvLayout,
                                  PlatformKind, ScalarType>;
TYPED_TEST_SUITE(EnumTest, AllEnums);

TYPED_TEST(EnumTest, EveryValuePrintsAndParsesBackInAnyCase) {
  std::set<std::string_view> seen;
  for (TypeParam value : all_values<TypeParam>()) {
    const std::string_view text = to_string(value);
    EXPECT_FALSE(text.empty());
    EXPECT_TRUE(seen.insert(text).second) << "duplicate spelling " << text;
    EXPECT_EQ(parse<TypeParam>(text), value) << text;
    EXPECT_EQ(parse<TypeParam>(upper(text)), value) << text;
  }
}

TYPED_TEST(EnumTest, ValidSpellingsAreTheCanonicalNamesSorted) {
  std::vector<std::string> names;
  for (TypeParam value : all_values<TypeParam>()) names.emplace_back(to_string(value));
  std::sort(names.begin(), names.end());
  std::string joined;
  for (const std::string& name : names) joined += (joined.empty() ? "" : ", ") + name;
  EXPECT_EQ(valid_spellings<TypeParam>(), joined);
}

TYPED_TEST(EnumTest, UnknownTextIsAnErrorListingTheValidSpellings) {
  try {
    parse<TypeParam>("no_such_value");
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    const std::string message = e.what();
    EXPECT_THAT(message, HasSubstr("'no_such_value'"));
    EXPECT_THAT(message, HasSubstr("Valid values are: " + valid_spellings<TypeParam>()));
  }
  EXPECT_THROW(parse<TypeParam>(""), Error);
}

TEST(Enums, ExactSpellingsAndErrorMessages) {
  EXPECT_EQ(valid_spellings<DType>(), "bfloat16, float16, float32");
  EXPECT_EQ(valid_spellings<KvCacheDType>(),
            "auto, bfloat16, float16, float32, fp8_e4m3, fp8_e5m2");
  EXPECT_EQ(valid_spellings<AttentionType>(), "decoder, encoder, encoder_decoder, encoder_only");
  EXPECT_EQ(valid_spellings<KvCacheKind>(),
            "chunked_local_attention, cross_attention, encoder_only_attention, full_attention, "
            "mamba, mla_attention, sink_full_attention, sliding_window, sliding_window_mla");
  EXPECT_EQ(valid_spellings<KvLayout>(), "HND, NHD");
  EXPECT_EQ(valid_spellings<PlatformKind>(), "cpu, cuda");
  try {
    parse<DType>("float64");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "Unknown dtype 'float64'. Valid values are: bfloat16, float16, float32");
  }
  try {
    parse<KvCacheKind>("global");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "Unknown KV cache group kind 'global'. Valid values are: chunked_local_attention, "
                 "cross_attention, encoder_only_attention, full_attention, mamba, mla_attention, "
                 "sink_full_attention, sliding_window, sliding_window_mla");
  }
}

TEST(Enums, KindsUseVllmSpellings) {
  EXPECT_EQ(to_string(KvCacheKind::kFullAttention), "full_attention");
  EXPECT_EQ(to_string(KvCacheKind::kSlidingWindow), "sliding_window");
  EXPECT_EQ(to_string(KvCacheKind::kMlaAttention), "mla_attention");
  EXPECT_EQ(to_string(KvCacheKind::kSlidingWindowMla), "sliding_window_mla");
  EXPECT_EQ(to_string(KvCacheKind::kChunkedLocalAttention), "chunked_local_attention");
  EXPECT_EQ(to_string(KvCacheKind::kSinkFullAttention), "sink_full_attention");
  EXPECT_EQ(to_string(KvCacheKind::kEncoderOnlyAttention), "encoder_only_attention");
  EXPECT_EQ(to_string(KvCacheKind::kCrossAttention), "cross_attention");
  EXPECT_EQ(to_string(KvCacheKind::kMamba), "mamba");
  EXPECT_EQ(all_values<KvCacheKind>().size(), 9u);
}

TEST(Enums, Aliases) {
  EXPECT_EQ(parse<DType>("bf16"), DType::kBFloat16);
  EXPECT_EQ(parse<DType>("FP16"), DType::kFloat16);
  EXPECT_EQ(parse<DType>("half"), DType::kFloat16);
  EXPECT_EQ(parse<DType>("fp32"), DType::kFloat32);
  EXPECT_EQ(parse<DType>("float"), DType::kFloat32);
  EXPECT_EQ(parse<KvCacheDType>("fp8"), KvCacheDType::kFp8E4M3);
  EXPECT_EQ(parse<KvCacheDType>("FP8_E5M2"), KvCacheDType::kFp8E5M2);
  EXPECT_EQ(parse<KvCacheDType>("bf16"), KvCacheDType::kBFloat16);
  EXPECT_EQ(parse<KvLayout>("nhd"), KvLayout::kNHD);
  // Aliases are accepted but never printed.
  EXPECT_EQ(to_string(KvCacheDType::kFp8E4M3), "fp8_e4m3");
  EXPECT_EQ(to_string(DType::kBFloat16), "bfloat16");
}

TEST(Enums, SizesAndStorageTypes) {
  EXPECT_EQ(size_of(ScalarType::kFloat32), 4u);
  EXPECT_EQ(size_of(ScalarType::kFloat16), 2u);
  EXPECT_EQ(size_of(ScalarType::kBFloat16), 2u);
  EXPECT_EQ(size_of(ScalarType::kFp8E4M3), 1u);
  EXPECT_EQ(size_of(ScalarType::kFp8E5M2), 1u);
  EXPECT_EQ(size_of(ScalarType::kInt32), 4u);
  EXPECT_EQ(size_of(ScalarType::kInt64), 8u);
  EXPECT_EQ(size_of(ScalarType::kUInt8), 1u);

  EXPECT_EQ(scalar_type_of(DType::kFloat32), ScalarType::kFloat32);
  EXPECT_EQ(scalar_type_of(DType::kFloat16), ScalarType::kFloat16);
  EXPECT_EQ(scalar_type_of(DType::kBFloat16), ScalarType::kBFloat16);
  for (DType compute : all_values<DType>()) {
    EXPECT_EQ(scalar_type_of(KvCacheDType::kAuto, compute), scalar_type_of(compute));
    EXPECT_EQ(kv_cache_dtype_bytes(KvCacheDType::kAuto, compute), size_of(scalar_type_of(compute)));
    EXPECT_EQ(scalar_type_of(KvCacheDType::kFp8E4M3, compute), ScalarType::kFp8E4M3);
    EXPECT_EQ(scalar_type_of(KvCacheDType::kFp8E5M2, compute), ScalarType::kFp8E5M2);
    EXPECT_EQ(scalar_type_of(KvCacheDType::kFloat16, compute), ScalarType::kFloat16);
    EXPECT_EQ(scalar_type_of(KvCacheDType::kBFloat16, compute), ScalarType::kBFloat16);
    EXPECT_EQ(scalar_type_of(KvCacheDType::kFloat32, compute), ScalarType::kFloat32);
    EXPECT_EQ(kv_cache_dtype_bytes(KvCacheDType::kFp8E4M3, compute), 1u);
  }
  for (KvCacheDType kv : all_values<KvCacheDType>()) {
    EXPECT_EQ(is_fp8(kv), kv == KvCacheDType::kFp8E4M3 || kv == KvCacheDType::kFp8E5M2);
  }
}

TEST(Errors, CodesPrintAndErrorsCarryThem) {
  EXPECT_EQ(to_string(ErrorCode::kInvalidArgument), "invalid_argument");
  EXPECT_EQ(to_string(ErrorCode::kNotFound), "not_found");
  EXPECT_EQ(to_string(ErrorCode::kUnsupported), "unsupported");
  EXPECT_EQ(to_string(ErrorCode::kOutOfMemory), "out_of_memory");
  EXPECT_EQ(to_string(ErrorCode::kPluginError), "plugin_error");
  EXPECT_EQ(to_string(ErrorCode::kInternal), "internal");
  const Error e(ErrorCode::kUnsupported, "no backend");
  EXPECT_EQ(e.code(), ErrorCode::kUnsupported);
  EXPECT_STREQ(e.what(), "no backend");
}

TEST(KvCacheDType, AutoResolvesToTheComputeDtypeAndConcreteDtypesStay) {
  EXPECT_EQ(resolve_kv_cache_dtype(KvCacheDType::kAuto, DType::kFloat32), KvCacheDType::kFloat32);
  EXPECT_EQ(resolve_kv_cache_dtype(KvCacheDType::kAuto, DType::kFloat16), KvCacheDType::kFloat16);
  EXPECT_EQ(resolve_kv_cache_dtype(KvCacheDType::kAuto, DType::kBFloat16), KvCacheDType::kBFloat16);
  for (DType compute : all_values<DType>()) {
    const KvCacheDType own = resolve_kv_cache_dtype(KvCacheDType::kAuto, compute);
    EXPECT_NE(own, KvCacheDType::kAuto);
    EXPECT_EQ(to_string(own), to_string(compute));  // the same spelling
    EXPECT_EQ(scalar_type_of(own, compute), scalar_type_of(compute));
    for (KvCacheDType kv : all_values<KvCacheDType>()) {
      if (kv == KvCacheDType::kAuto) continue;
      EXPECT_EQ(resolve_kv_cache_dtype(kv, compute), kv) << to_string(kv);
      // Resolving is idempotent: what selection hands down resolves to itself.
      EXPECT_EQ(resolve_kv_cache_dtype(resolve_kv_cache_dtype(kv, compute), compute), kv);
    }
  }
}

TEST(ErrorsDeathTest, CheckAbortsWithLocation) {
  EXPECT_DEATH(ATTNKIT_CHECK(1 + 1 == 3, "arithmetic"),
               "attnkit internal error at .*enums_test.cpp:[0-9]+: check '1 \\+ 1 == 3' failed: "
               "arithmetic");
}

}  // namespace
}  // namespace attnkit
