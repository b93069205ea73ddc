// The plugin ABI's binary layout is a promise to every plugin ever built: version-1 fields
// keep their offsets forever (new fields only go at the end), and readers can tell which
// fields a writer's struct contains.
#include "attnkit/plugin_abi.h"

#include <gtest/gtest.h>

#include <cstddef>

#include "plugin/abi_convert.h"

namespace {

TEST(PluginAbi, VersionOneFieldOffsetsNeverChange) {
  if (sizeof(void*) != 8 || alignof(int64_t) != 8) GTEST_SKIP() << "offsets recorded for LP64";
  EXPECT_EQ(offsetof(AttnkitStatus, code), 8u);
  EXPECT_EQ(offsetof(AttnkitStatus, message), 16u);
  EXPECT_EQ(offsetof(AttnkitStatus, release), 24u);
  EXPECT_EQ(offsetof(AttnkitSizeRule, num_exact), 16u);
  EXPECT_EQ(offsetof(AttnkitSizeRule, max), 28u);
  EXPECT_EQ(offsetof(AttnkitCapabilities, dtypes), 24u);
  EXPECT_EQ(offsetof(AttnkitCapabilities, head_sizes), 56u);
  EXPECT_EQ(offsetof(AttnkitCapabilities, attention_types), 88u);
  EXPECT_EQ(offsetof(AttnkitCapabilities, required_layout), 136u);
  EXPECT_EQ(offsetof(AttnkitSelectorConfig, soft_cap), 56u);
  EXPECT_EQ(offsetof(AttnkitSelectorConfig, kv_connector), 68u);
  EXPECT_EQ(offsetof(AttnkitPlatform, device_name), 32u);
  EXPECT_EQ(offsetof(AttnkitLayerParams, sinks), 56u);
  EXPECT_EQ(offsetof(AttnkitLayerParams, mla_rope_dim), 88u);
  EXPECT_EQ(offsetof(AttnkitCommonMetadata, slot_mapping), 48u);
  EXPECT_EQ(offsetof(AttnkitCommonMetadata, null_block_id), 80u);
  EXPECT_EQ(offsetof(AttnkitCommonMetadata, num_slots), 84u);
  EXPECT_EQ(offsetof(AttnkitKvCache, storage_dtype), 32u);
  EXPECT_EQ(offsetof(AttnkitBackendDesc, probe), 40u);
  EXPECT_EQ(offsetof(AttnkitBackendDesc, impl_forward), 96u);
  EXPECT_EQ(offsetof(AttnkitPluginTable, backends), 24u);
  EXPECT_EQ(offsetof(AttnkitPluginTable, shutdown), 40u);
  EXPECT_EQ(offsetof(AttnkitHostApi, log), 24u);
  EXPECT_EQ(offsetof(AttnkitReasonSink, add), 16u);
}

TEST(PluginAbi, HasFieldFollowsTheWritersStructSize) {
  AttnkitCapabilities caps{};
  caps.struct_size = sizeof(AttnkitCapabilities);
  EXPECT_TRUE(ATTNKIT_HAS_FIELD(&caps, AttnkitCapabilities, required_layout));
  // A writer built before required_layout existed.
  caps.struct_size = static_cast<uint32_t>(offsetof(AttnkitCapabilities, required_layout));
  EXPECT_FALSE(ATTNKIT_HAS_FIELD(&caps, AttnkitCapabilities, required_layout));
  EXPECT_TRUE(ATTNKIT_HAS_FIELD(&caps, AttnkitCapabilities, kv_connector));
}

TEST(PluginAbi, SupportedVersionRangeIsConsistent) {
  EXPECT_GE(ATTNKIT_PLUGIN_ABI_VERSION, ATTNKIT_PLUGIN_ABI_MIN_VERSION);
  EXPECT_GE(ATTNKIT_PLUGIN_ABI_MIN_VERSION, 1u);
  EXPECT_STREQ(ATTNKIT_PLUGIN_INIT_SYMBOL, "attnkit_plugin_init");
}

// A layer's KV dtype crosses the ABI as AUTO when it is the compute dtype's own (what
// "auto" means in the ABI, and all a plugin listing no KV dtypes accepts), whether the
// caller said auto or selection already resolved it; every other dtype as itself.
TEST(PluginAbi, TheComputeDtypesOwnKvDtypeCrossesAsAuto) {
  using attnkit::DType;
  using attnkit::KvCacheDType;
  for (DType d : attnkit::all_values<DType>()) {
    const KvCacheDType own = attnkit::resolve_kv_cache_dtype(KvCacheDType::kAuto, d);
    EXPECT_EQ(attnkit::plugin::kv_cache_dtype_to_c(KvCacheDType::kAuto, d), ATTNKIT_KV_DTYPE_AUTO);
    EXPECT_EQ(attnkit::plugin::kv_cache_dtype_to_c(own, d), ATTNKIT_KV_DTYPE_AUTO);
    for (KvCacheDType kv : attnkit::all_values<KvCacheDType>()) {
      if (kv == KvCacheDType::kAuto || kv == own) continue;
      EXPECT_EQ(attnkit::plugin::kv_cache_dtype_to_c(kv, d), attnkit::plugin::to_c(kv));
      EXPECT_NE(attnkit::plugin::to_c(kv), ATTNKIT_KV_DTYPE_AUTO);
    }
  }
  attnkit::SelectorConfig config;
  config.dtype = DType::kFloat16;
  config.kv_cache_dtype = KvCacheDType::kFloat16;
  EXPECT_EQ(attnkit::plugin::to_c(config).kv_cache_dtype, ATTNKIT_KV_DTYPE_AUTO);
  config.kv_cache_dtype = KvCacheDType::kBFloat16;
  EXPECT_EQ(attnkit::plugin::to_c(config).kv_cache_dtype, ATTNKIT_KV_DTYPE_BFLOAT16);
}

}  // namespace
