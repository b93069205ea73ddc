#include "backends/cpu_mla/cpu_mla_impl.h"

#include <fmt/format.h>

#include <span>
#include <string>

#include "attnkit/backend/forward_check.h"
#include "attnkit/backend/paged_params.h"
#include "attnkit/core/error.h"
#include "attnkit/kernels/cpu_cache_update.h"

namespace attnkit::cpu_mla {
namespace {

template <typename... Args>
void require(bool ok, ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  if (!ok) throw Error(code, "CPU_MLA: " + fmt::format(format, std::forward<Args>(args)...));
}

constexpr ForwardCheckOptions kChecks{.backend = "CPU_MLA"};

}  // namespace

CpuMlaBuilder::CpuMlaBuilder(const AttentionLayerParams& layer) : layer_(layer) {}

const AttentionMetadata& CpuMlaBuilder::build(const CommonAttentionMetadata& common,
                                              const ExecutionContext& /*ctx*/) {
  check_common_metadata(common, layer_, "CPU_MLA");
  for (int i = 0; i < common.num_reqs; ++i) {
    const auto s = static_cast<size_t>(i);
    const int q_len = common.query_start_loc[s + 1] - common.query_start_loc[s];
    require(q_len <= common.seq_lens[s], ErrorCode::kInvalidArgument,
            "request {} has {} new tokens but seq_len {} (queries are the last tokens of the "
            "sequence)",
            i, q_len, common.seq_lens[s]);
  }
  metadata_.common_ = &common;
  metadata_.plan_ = make_mla_plan(std::span<const int32_t>(common.query_start_loc),
                                  std::span<const int32_t>(common.seq_lens), layer_.num_heads,
                                  MaskRule{.causal = layer_.is_causal() && common.causal,
                                           .sliding_window = layer_.sliding_window});
  // Grown here, not in the first forward() (the kernels' own ensure() then finds it large
  // enough): a grown split-KV partial buffer is zeroed and page-faulted as it grows, about
  // 80 us for a one-request 16-head step's 128 KiB on a 2-core guest.
  metadata_.workspace_.ensure(metadata_.plan_, layer_.head_size, layer_.head_size_v);
  return metadata_;
}

CpuMlaImpl::CpuMlaImpl(const AttentionLayerParams& layer) : layer_(layer) {
  constexpr ErrorCode kNo = ErrorCode::kUnsupported;
  require(layer.use_mla, kNo, "serves MLA layers only (layer {} is not MLA)", layer.layer_index);
  require(layer.attn_type == AttentionType::kDecoder, kNo,
          "attention type {} not supported (supported: decoder)", to_string(layer.attn_type));
  require(layer.num_kv_heads == 1, kNo, "num_kv_heads {} not supported (MLA: 1)",
          layer.num_kv_heads);
  require(layer.num_heads > 0, kNo, "num_heads {} must be positive", layer.num_heads);
  require(layer.head_size == kMlaLatentDim && layer.head_size_v == kMlaValueDim, kNo,
          "head_size {} / head_size_v {} not supported (supported: {} / {})", layer.head_size,
          layer.head_size_v, kMlaLatentDim, kMlaValueDim);
  require(layer.sinks.empty() && layer.soft_cap == 0.0f && layer.chunk_size == 0, kNo,
          "sinks, soft-capping and chunked-local attention are not supported");
  check_layer_params(layer, "CPU_MLA");
}

void CpuMlaImpl::forward(const TensorView& query, const TensorView& key, const TensorView& value,
                         const KvCacheTensors& cache, const AttentionMetadata& metadata,
                         const TensorView& output, const ExecutionContext& /*ctx*/) {
  const auto* meta = dynamic_cast<const CpuMlaMetadata*>(&metadata);
  require(meta != nullptr, ErrorCode::kInvalidArgument,
          "metadata was not built by a CPU_MLA builder");
  const ForwardArgs args{layer_, query, key, value, cache, meta->common(), output};
  check_forward(args, kChecks);
  if (writes_cache(args)) cpu::cache_update(cache_update_params_for(args));
  mla_attention(paged_params_for(args), meta->plan(), meta->workspace());
  check_forward_outputs(args, kChecks);
}

}  // namespace attnkit::cpu_mla
