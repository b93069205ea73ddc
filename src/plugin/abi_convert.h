#pragma once
// Conversions between attnkit's C++ vocabulary and the plain-C structs of plugin_abi.h.
// Host -> plugin conversions fill C structs whose pointers refer into the C++ objects (which
// must outlive the C structs). Plugin -> host conversions validate every value the plugin
// wrote and throw Error(kPluginError) naming the field and the bad value.

#include <cstddef>
#include <string>
#include <string_view>

#include "attnkit/backend/backend.h"
#include "attnkit/plugin_abi.h"

namespace attnkit::plugin {

// Bytes of a version-1 struct: up to and including its last version-1 field. A plugin's
// struct_size below this means a malformed struct; above it, a newer plugin whose extra
// fields this host ignores.
#define ATTNKIT_V1_SIZE(type, last_field) (offsetof(type, last_field) + sizeof(type::last_field))
inline constexpr size_t kStatusV1Size = ATTNKIT_V1_SIZE(AttnkitStatus, release);
inline constexpr size_t kSizeRuleV1Size = ATTNKIT_V1_SIZE(AttnkitSizeRule, max);
inline constexpr size_t kCapabilitiesV1Size = ATTNKIT_V1_SIZE(AttnkitCapabilities, required_layout);
inline constexpr size_t kBackendDescV1Size = ATTNKIT_V1_SIZE(AttnkitBackendDesc, impl_forward);
inline constexpr size_t kPluginTableV1Size = ATTNKIT_V1_SIZE(AttnkitPluginTable, shutdown);
#undef ATTNKIT_V1_SIZE

// Every struct a plugin writes starts with struct_size and abi_version: the size must
// cover the version-1 fields and the version must lie in ATTNKIT_PLUGIN_ABI_MIN_VERSION ..
// ATTNKIT_PLUGIN_ABI_VERSION (a struct claiming a newer version than the table's or the
// host's is refused, not read as if it were current). Error(kPluginError) naming `what`.
void check_struct_header(std::string_view what, uint32_t struct_size, uint32_t abi_version,
                         size_t min_size);

// --- Enumerations (C++ -> C code) ---------------------------------------------------------
int32_t to_c(DType v);
int32_t to_c(KvCacheDType v);
// A layer's KV dtype as the ABI says it: AUTO is "the cache stores the compute dtype"
// (plugin_abi.h), the one spelling a plugin that lists no KV dtypes accepts. Selection
// hands down a resolved dtype, so the compute dtype's own crosses as AUTO, as it always
// has; every other dtype crosses as itself.
int32_t kv_cache_dtype_to_c(KvCacheDType kv, DType dtype);
int32_t to_c(AttentionType v);
int32_t to_c(KvCacheKind v);
int32_t to_c(KvLayout v);
int32_t to_c(PlatformKind v);
int32_t to_c(ScalarType v);
// "invalid argument", "unsupported", ... for ATTNKIT_STATUS_* codes (or "status N").
std::string status_code_name(int32_t code);

// --- Plugin -> host -----------------------------------------------------------------------
// Capabilities of backend `backend_name`, validated field by field.
BackendCapabilities capabilities_from_c(const AttnkitCapabilities& caps,
                                        std::string_view backend_name);

// --- Host -> plugin (outputs refer into the inputs) ---------------------------------------
AttnkitSelectorConfig to_c(const SelectorConfig& config);
// `device_name` of the result points into `platform.device_name`.
AttnkitPlatform to_c(const Platform& platform);
// `sinks` of the result points into `layer.sinks`.
AttnkitLayerParams to_c(const AttentionLayerParams& layer);
AttnkitKvCacheSpec to_c(const KvCacheSpec& spec);
// Array pointers of the result point into `common`'s vectors.
AttnkitCommonMetadata to_c(const CommonAttentionMetadata& common);

}  // namespace attnkit::plugin
