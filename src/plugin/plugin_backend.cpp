#include "plugin/plugin_backend.h"

#include <fmt/format.h>

#include <cctype>
#include <filesystem>
#include <utility>
#include <vector>

#include "attnkit/backend/forward_check.h"
#include "attnkit/core/error.h"
#include "attnkit/registry/registry.h"
#include "plugin/abi_convert.h"

namespace attnkit::plugin {
namespace {

// What every adapter object needs to call into the plugin and to name it in errors.
// Holding `library` keeps the shared library mapped while the object lives.
struct PluginRef {
  std::shared_ptr<PluginLibrary> library;
  const AttnkitBackendDesc* desc = nullptr;
  std::string name;

  // "plugin backend NAME (/path/libfoo.so): <call>"
  std::string context(std::string_view call) const {
    return fmt::format("plugin backend {} ({}): {}", name, library->path(), call);
  }
};

// A plan made by a PluginBuilder: the plugin's opaque plan plus the common metadata it was
// built from. Owned by the builder; valid until its next build().
class PluginMetadata final : public AttentionMetadata {
 public:
  explicit PluginMetadata(const AttnkitBackendDesc* desc) : desc_(desc) {}
  const CommonAttentionMetadata& common() const override { return *common_; }

  const AttnkitBackendDesc* desc() const { return desc_; }
  const AttnkitPlan* plan() const { return plan_; }
  void reset(const CommonAttentionMetadata* common, AttnkitPlan* plan) {
    common_ = common;
    plan_ = plan;
  }

 private:
  const AttnkitBackendDesc* desc_;
  const CommonAttentionMetadata* common_ = nullptr;
  AttnkitPlan* plan_ = nullptr;
};

class PluginBuilder final : public MetadataBuilder {
 public:
  PluginBuilder(PluginRef ref, AttnkitBuilder* handle)
      : ref_(std::move(ref)), handle_(handle), metadata_(ref_.desc) {}
  PluginBuilder(const PluginBuilder&) = delete;
  PluginBuilder& operator=(const PluginBuilder&) = delete;
  ~PluginBuilder() override { ref_.desc->builder_destroy(handle_); }

  const AttentionMetadata& build(const CommonAttentionMetadata& common,
                                 const ExecutionContext& /*ctx*/) override {
    // The C view points into `common`, which the caller keeps alive until the next build.
    c_common_ = to_c(common);
    AttnkitPlan* plan = nullptr;
    metadata_.reset(nullptr, nullptr);
    throw_if_error(ref_.desc->builder_build(handle_, &c_common_, &plan),
                   ref_.context("builder_build"));
    metadata_.reset(&common, plan);
    return metadata_;
  }

 private:
  PluginRef ref_;
  AttnkitBuilder* handle_;
  AttnkitCommonMetadata c_common_{};
  PluginMetadata metadata_;
};

// A DLTensor over `view` (which must outlive it), or nullptr for an empty view.
const DLTensor* dl_or_null(const TensorView& view, DLTensor& storage) {
  if (view.empty()) return nullptr;
  to_dlpack(view, storage);
  return &storage;
}

class PluginImpl final : public AttentionImpl {
 public:
  PluginImpl(PluginRef ref, AttnkitImpl* handle, const AttentionLayerParams& layer,
             DeviceType device)
      : ref_(std::move(ref)),
        handle_(handle),
        layer_(layer),
        device_(device),
        cache_dtype_(scalar_type_of(layer.kv_cache_dtype, layer.dtype)) {}
  PluginImpl(const PluginImpl&) = delete;
  PluginImpl& operator=(const PluginImpl&) = delete;
  ~PluginImpl() override { ref_.desc->impl_destroy(handle_); }

  std::string_view backend_name() const override { return ref_.name; }

  void forward(const TensorView& query, const TensorView& key, const TensorView& value,
               const KvCacheTensors& cache, const AttentionMetadata& metadata,
               const TensorView& output, const ExecutionContext& /*ctx*/) override {
    const auto* plan = dynamic_cast<const PluginMetadata*>(&metadata);
    if (plan == nullptr || plan->desc() != ref_.desc) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: the metadata was not built by this backend's builder",
                              ref_.context("forward")));
    }
    // The checks every built-in backend runs (forward_check.h): a plugin sees only inputs
    // (query and output present among them) whose shapes, dtypes, device, block ids and
    // slots fit the layer and the cache, and
    // in checked mode its host outputs are scanned for NaN/inf like the built-ins'.
    const ForwardArgs args{layer_, query, key, value, cache, plan->common(), output};
    const ForwardCheckOptions checks{.backend = ref_.name, .device = device_};
    check_forward(args, checks);
    DLTensor q{}, k{}, v{}, o{}, kc{}, vc{};
    AttnkitKvCache c_cache{};
    c_cache.struct_size = sizeof(c_cache);
    c_cache.abi_version = ATTNKIT_PLUGIN_ABI_VERSION;
    c_cache.key = dl_or_null(cache.key, kc);
    c_cache.value = dl_or_null(cache.value, vc);
    c_cache.layout = to_c(cache.layout);
    c_cache.block_size = cache.block_size;
    c_cache.storage_dtype = to_c(cache.key.empty() ? cache_dtype_ : cache.key.dtype);
    throw_if_error(ref_.desc->impl_forward(handle_, dl_or_null(query, q), dl_or_null(key, k),
                                           dl_or_null(value, v), &c_cache, plan->plan(),
                                           dl_or_null(output, o)),
                   ref_.context("impl_forward"));
    check_forward_outputs(args, checks);
  }

 private:
  PluginRef ref_;
  AttnkitImpl* handle_;
  AttentionLayerParams layer_;
  DeviceType device_;
  ScalarType cache_dtype_;
};

class PluginBackend final : public AttentionBackend {
 public:
  PluginBackend(PluginRef ref, std::string description, BackendCapabilities caps)
      : ref_(std::move(ref)), description_(std::move(description)), caps_(std::move(caps)) {}

  std::string_view name() const override { return ref_.name; }
  std::string_view description() const override { return description_; }
  const BackendCapabilities& capabilities() const override { return caps_; }

  // The plugin's probe decided at load time whether it runs on this machine; no kernels of
  // this binary are involved.
  std::optional<std::string> binary_reason(const Platform& /*platform*/) const override {
    return std::nullopt;
  }

  std::unique_ptr<MetadataBuilder> make_builder(const KvCacheSpec& spec,
                                                const AttentionLayerParams& layer) const override {
    const AttnkitKvCacheSpec c_spec = to_c(spec);
    const AttnkitLayerParams c_layer = to_c(layer);
    AttnkitBuilder* handle = nullptr;
    throw_if_error(ref_.desc->builder_create(ref_.desc->user_data, &c_spec, &c_layer, &handle),
                   ref_.context("builder_create"));
    if (handle == nullptr) {
      throw Error(ErrorCode::kPluginError,
                  ref_.context("builder_create returned success but no builder"));
    }
    return std::make_unique<PluginBuilder>(ref_, handle);
  }

  std::unique_ptr<AttentionImpl> make_impl(const AttentionLayerParams& layer) const override {
    const AttnkitLayerParams c_layer = to_c(layer);
    AttnkitImpl* handle = nullptr;
    throw_if_error(ref_.desc->impl_create(ref_.desc->user_data, &c_layer, &handle),
                   ref_.context("impl_create"));
    if (handle == nullptr) {
      throw Error(ErrorCode::kPluginError,
                  ref_.context("impl_create returned success but no implementation"));
    }
    return std::make_unique<PluginImpl>(
        ref_, handle, layer,
        caps_.platform == PlatformKind::kCuda ? DeviceType::kCuda : DeviceType::kCpu);
  }

 protected:
  std::vector<std::string> check_combination(const SelectorConfig& config,
                                             const Platform& platform) const override {
    std::vector<std::string> reasons;
    if (ref_.desc->check == nullptr) return reasons;
    const AttnkitSelectorConfig c_config = to_c(config);
    const AttnkitPlatform c_platform = to_c(platform);
    AttnkitReasonSink sink{};
    sink.struct_size = sizeof(sink);
    sink.abi_version = ATTNKIT_PLUGIN_ABI_VERSION;
    sink.context = &reasons;
    sink.add = [](void* context, const char* reason) {
      static_cast<std::vector<std::string>*>(context)->emplace_back(
          reason != nullptr ? reason : "(no reason given)");
    };
    // A failing check cannot vouch for the combination: it becomes a reason, so selection
    // moves on to another backend and explains why.
    if (auto failure =
            take_status(ref_.desc->check(ref_.desc->user_data, &c_config, &c_platform, &sink))) {
      reasons.push_back(fmt::format("plugin combination check failed: {}", *failure));
    }
    return reasons;
  }

 private:
  PluginRef ref_;
  std::string description_;
  BackendCapabilities caps_;
};

}  // namespace

std::string plugin_backend_name(const AttnkitBackendDesc& desc) {
  if (desc.name == nullptr || desc.name[0] == '\0') {
    throw Error(ErrorCode::kPluginError, "a backend has no name");
  }
  std::string name;
  for (const char* p = desc.name; *p != '\0'; ++p) {
    const auto ch = static_cast<unsigned char>(*p);
    if (!std::isalnum(ch) && ch != '_') {
      throw Error(
          ErrorCode::kPluginError,
          fmt::format("backend name '{}' may contain only letters, digits and '_'", desc.name));
    }
    name += static_cast<char>(std::toupper(ch));
  }
  if (name == kReservedAutoName) {
    throw Error(ErrorCode::kPluginError,
                fmt::format("backend name '{}' is reserved: 'auto' asks the selector to choose, "
                            "so the backend could never be chosen",
                            desc.name));
  }
  return name;
}

std::unique_ptr<AttentionBackend> make_plugin_backend(std::shared_ptr<PluginLibrary> library,
                                                      const AttnkitBackendDesc& desc) {
  PluginRef ref{std::move(library), &desc, plugin_backend_name(desc)};
  const std::string what = fmt::format("plugin backend {} ({})", ref.name, ref.library->path());
  check_struct_header(what, desc.struct_size, desc.abi_version, kBackendDescV1Size);
  const std::pair<bool, const char*> required[] = {
      {desc.capabilities != nullptr, "capabilities"},
      {desc.builder_create != nullptr, "builder_create"},
      {desc.builder_destroy != nullptr, "builder_destroy"},
      {desc.builder_build != nullptr, "builder_build"},
      {desc.impl_create != nullptr, "impl_create"},
      {desc.impl_destroy != nullptr, "impl_destroy"},
      {desc.impl_forward != nullptr, "impl_forward"},
  };
  for (const auto& [present, field] : required) {
    if (!present) {
      throw Error(ErrorCode::kPluginError,
                  fmt::format("{}: required field {} is NULL", what, field));
    }
  }
  BackendCapabilities caps = capabilities_from_c(*desc.capabilities, ref.name);
  std::string description = desc.description != nullptr ? desc.description : "";
  description +=
      fmt::format(" [plugin {}]", std::filesystem::path(ref.library->path()).filename().string());
  return std::make_unique<PluginBackend>(std::move(ref), std::move(description), std::move(caps));
}

}  // namespace attnkit::plugin
