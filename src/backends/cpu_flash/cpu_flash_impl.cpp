#include "backends/cpu_flash/cpu_flash_impl.h"

#include <string>

#include "attnkit/backend/forward_check.h"
#include "attnkit/backend/paged_params.h"
#include "attnkit/core/error.h"
#include "backends/cpu_flash/cpu_flash_metadata.h"
#include "backends/cpu_flash/flash_attention.h"

namespace attnkit::cpu {
namespace {

[[noreturn]] void bad(const std::string& what) {
  throw Error(ErrorCode::kInvalidArgument, "CPU_FLASH forward: " + what);
}

constexpr ForwardCheckOptions kChecks{.backend = "CPU_FLASH"};

}  // namespace

CpuFlashImpl::CpuFlashImpl(const AttentionLayerParams& layer) : layer_(layer) {
  auto unsupported = [](const std::string& why) {
    throw Error(ErrorCode::kUnsupported, "CPU_FLASH cannot run this layer: " + why);
  };
  if (layer.num_kv_heads <= 0 || layer.num_heads <= 0 ||
      layer.num_heads % layer.num_kv_heads != 0) {
    unsupported("num_heads " + std::to_string(layer.num_heads) +
                " must be a positive multiple of num_kv_heads " +
                std::to_string(layer.num_kv_heads));
  }
  for (int size : {layer.head_size, layer.head_size_v}) {
    if (size <= 0 || size % kHeadSizeMultiple != 0 || size > kMaxHeadSize) {
      unsupported("head size " + std::to_string(size) +
                  " not supported (supported: multiples of 16 up to " +
                  std::to_string(kMaxHeadSize) + ")");
    }
  }
  if (layer.use_mla && (layer.num_kv_heads != 1 || layer.head_size_v > layer.head_size)) {
    unsupported("MLA needs num_kv_heads 1 and head_size_v <= head_size");
  }
  if (!layer.sinks.empty() && layer.sinks.size() != static_cast<size_t>(layer.num_heads)) {
    unsupported("sinks has " + std::to_string(layer.sinks.size()) +
                " entries, expected num_heads " + std::to_string(layer.num_heads));
  }
  check_layer_params(layer, "CPU_FLASH");
}

void CpuFlashImpl::forward(const TensorView& query, const TensorView& key, const TensorView& value,
                           const KvCacheTensors& cache, const AttentionMetadata& metadata,
                           const TensorView& output, const ExecutionContext& /*ctx*/) {
  const auto* plan = dynamic_cast<const CpuFlashMetadata*>(&metadata);
  if (plan == nullptr) bad("metadata was not built by a CPU_FLASH builder");
  const ForwardArgs args{layer_, query, key, value, cache, plan->common(), output};
  check_forward(args, kChecks);
  if (writes_cache(args)) cache_update(cache_update_params_for(args));
  flash_attention(paged_params_for(args), plan->plan(), plan->workspace());
  check_forward_outputs(args, kChecks);
}

}  // namespace attnkit::cpu
