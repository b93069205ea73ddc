#include "attnkit/backend/composite_backend.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "attnkit/core/error.h"

namespace attnkit {
namespace {

// Workspace parts are aligned like a CUDA allocation, so each sub-builder gets memory it
// could have had from cudaMalloc.
constexpr size_t kWorkspaceAlign = 256;
size_t align_up(size_t n) { return (n + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign; }

// Rows [begin, end) of a tensor whose first dimension is the token; empty stays empty.
TensorView row_slice(const TensorView& t, int64_t begin, int64_t end) {
  if (t.empty()) return t;
  TensorView out = t;
  out.data = static_cast<char*>(t.data) +
             static_cast<ptrdiff_t>(begin * t.stride(0) * static_cast<int64_t>(size_of(t.dtype)));
  out.shape[0] = end - begin;
  return out;
}

template <typename E>
std::vector<E> intersect_values(const std::vector<E>& a, const std::vector<E>& b) {
  std::vector<E> out;
  for (E v : a) {
    if (std::find(b.begin(), b.end(), v) != b.end()) out.push_back(v);
  }
  return out;
}

// A rule no value satisfies (min above max).
SizeRule no_sizes() {
  SizeRule r = SizeRule::multiple(1, 2, 1);
  return r;
}

int min_bound(int a, int b) {
  if (a == 0) return b;
  if (b == 0) return a;
  return std::min(a, b);
}

BackendCapabilities intersect_capabilities(const BackendCapabilities& p,
                                           const BackendCapabilities& d) {
  BackendCapabilities c;
  c.platform = p.platform;
  c.min_compute_capability = std::max(p.min_compute_capability, d.min_compute_capability);
  c.max_compute_capability = min_bound(p.max_compute_capability, d.max_compute_capability);
  c.dtypes = intersect_values(p.dtypes, d.dtypes);
  c.kv_cache_dtypes = intersect_values(p.kv_cache_dtypes, d.kv_cache_dtypes);
  c.head_sizes = intersect(p.head_sizes, d.head_sizes);
  c.separate_v_head_size = p.separate_v_head_size && d.separate_v_head_size;
  c.kernel_block_sizes = intersect(p.kernel_block_sizes, d.kernel_block_sizes);
  // The prefill backend's preference when the decode kernels take it, else the decode's.
  c.preferred_block_size = block_size_servable(d.kernel_block_sizes, p.preferred_block_size)
                               ? p.preferred_block_size
                               : d.preferred_block_size;
  c.attention_types = intersect_values(intersect_values(p.attention_types, d.attention_types),
                                       std::vector<AttentionType>{AttentionType::kDecoder});
  c.mla = p.mla && d.mla;
  c.mla_only = p.mla_only || d.mla_only;
  c.sliding_window = p.sliding_window && d.sliding_window;
  c.chunked_local = p.chunked_local && d.chunked_local;
  c.sinks = p.sinks && d.sinks;
  c.sink_tokens = p.sink_tokens && d.sink_tokens;
  c.soft_cap = p.soft_cap && d.soft_cap;
  c.non_causal = false;  // decoder self-attention only
  c.batch_invariant = p.batch_invariant && d.batch_invariant;
  c.kv_connector = p.kv_connector && d.kv_connector;
  c.required_layout = p.required_layout ? p.required_layout : d.required_layout;
  c.cuda_graphs = std::min(p.cuda_graphs, d.cuda_graphs);
  return c;
}

// The plan of one step: each phase's plan (null when the step has no rows of it).
class CompositeMetadata final : public AttentionMetadata {
 public:
  const CommonAttentionMetadata& common() const override { return *common_; }

  const CommonAttentionMetadata* common_ = nullptr;
  PhaseSplit split;
  const AttentionMetadata* decode = nullptr;
  const AttentionMetadata* prefill = nullptr;
};

class CompositeBuilder final : public MetadataBuilder {
 public:
  CompositeBuilder(std::unique_ptr<MetadataBuilder> prefill,
                   std::unique_ptr<MetadataBuilder> decode)
      : prefill_(std::move(prefill)), decode_(std::move(decode)) {}

  size_t workspace_bytes(const StepLimits& limits) const override {
    const size_t d = decode_->workspace_bytes(limits), p = prefill_->workspace_bytes(limits);
    return d + p == 0 ? 0 : align_up(d) + p;
  }

  // Each phase may hold every request of a step, so each sub-builder is reserved for the
  // whole limits; a caller's workspace is split between them (decode part first).
  void reserve(const StepLimits& limits, void* workspace) override {
    void* prefill_workspace = nullptr;
    if (workspace != nullptr) {
      prefill_workspace =
          static_cast<char*>(workspace) + align_up(decode_->workspace_bytes(limits));
    }
    decode_->reserve(limits, workspace);
    prefill_->reserve(limits, prefill_workspace);
    const auto reqs = static_cast<size_t>(limits.max_num_reqs);
    for (CommonAttentionMetadata* part : {&decode_common_, &prefill_common_}) {
      part->query_start_loc.reserve(reqs + 1);
      part->seq_lens.reserve(reqs);
      part->slot_mapping.reserve(static_cast<size_t>(limits.max_num_tokens));
      if (limits.max_blocks_per_req > 0) {
        part->block_table.reserve(reqs * static_cast<size_t>(limits.max_blocks_per_req));
      }
    }
  }

  const AttentionMetadata& build(const CommonAttentionMetadata& common,
                                 const ExecutionContext& ctx) override {
    plan_.common_ = &common;
    plan_.split = split_phases(common);
    plan_.decode = plan_.prefill = nullptr;
    if (plan_.split.num_decode_reqs > 0) {
      slice_requests(common, 0, plan_.split.num_decode_reqs, decode_common_);
      plan_.decode = &decode_->build(decode_common_, ctx);
    }
    if (plan_.split.num_prefill_reqs > 0) {
      slice_requests(common, plan_.split.num_decode_reqs, plan_.split.num_prefill_reqs,
                     prefill_common_);
      plan_.prefill = &prefill_->build(prefill_common_, ctx);
    }
    return plan_;
  }

 private:
  std::unique_ptr<MetadataBuilder> prefill_, decode_;
  CommonAttentionMetadata decode_common_, prefill_common_;
  CompositeMetadata plan_;
};

class CompositeImpl final : public AttentionImpl {
 public:
  CompositeImpl(std::string name, std::unique_ptr<AttentionImpl> prefill,
                std::unique_ptr<AttentionImpl> decode)
      : name_(std::move(name)), prefill_(std::move(prefill)), decode_(std::move(decode)) {}

  std::string_view backend_name() const override { return name_; }
  std::string_view phase_backend_name(Phase phase) const override {
    return phase == Phase::kDecode ? decode_->backend_name() : prefill_->backend_name();
  }

  void forward(const TensorView& query, const TensorView& key, const TensorView& value,
               const KvCacheTensors& cache, const AttentionMetadata& metadata,
               const TensorView& output, const ExecutionContext& ctx) override {
    const auto* plan = dynamic_cast<const CompositeMetadata*>(&metadata);
    if (plan == nullptr) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: the metadata was not built by this composite's builder", name_));
    }
    const int64_t split = plan->split.num_decode_tokens;
    const int64_t total = split + plan->split.num_prefill_tokens;
    if (plan->decode != nullptr) {
      decode_->forward(row_slice(query, 0, split), row_slice(key, 0, split),
                       row_slice(value, 0, split), cache, *plan->decode,
                       row_slice(output, 0, split), ctx);
    }
    if (plan->prefill != nullptr) {
      prefill_->forward(row_slice(query, split, total), row_slice(key, split, total),
                        row_slice(value, split, total), cache, *plan->prefill,
                        row_slice(output, split, total), ctx);
    }
  }

 private:
  std::string name_;
  std::unique_ptr<AttentionImpl> prefill_, decode_;
};

class CompositeBackend final : public AttentionBackend {
 public:
  CompositeBackend(std::shared_ptr<const AttentionBackend> prefill,
                   std::shared_ptr<const AttentionBackend> decode)
      : prefill_(std::move(prefill)),
        decode_(std::move(decode)),
        name_(composite_name(prefill_->name(), decode_->name())),
        description_(fmt::format("prefill rows on {}, decode rows on {}, one KV cache",
                                 prefill_->name(), decode_->name())),
        caps_(intersect_capabilities(prefill_->capabilities(), decode_->capabilities())) {}

  std::string_view name() const override { return name_; }
  std::string_view description() const override { return description_; }
  const BackendCapabilities& capabilities() const override { return caps_; }

  std::optional<std::string> binary_reason(const Platform& platform) const override {
    if (auto why = prefill_->binary_reason(platform)) return *why;
    return decode_->binary_reason(platform);
  }
  int preferred_block_size(const KvCacheSpec& spec) const override {
    const int p = prefill_->preferred_block_size(spec);
    return block_size_servable(decode_->capabilities().kernel_block_sizes, p)
               ? p
               : decode_->preferred_block_size(spec);
  }
  // Both backends shape the spec, prefill first.
  KvCacheSpec customize_spec(const KvCacheSpec& spec) const override {
    return decode_->customize_spec(prefill_->customize_spec(spec));
  }
  std::unique_ptr<MetadataBuilder> make_builder(const KvCacheSpec& spec,
                                                const AttentionLayerParams& layer) const override {
    return std::make_unique<CompositeBuilder>(prefill_->make_builder(spec, layer),
                                              decode_->make_builder(spec, layer));
  }
  std::unique_ptr<AttentionImpl> make_impl(const AttentionLayerParams& layer) const override {
    return std::make_unique<CompositeImpl>(name_, prefill_->make_impl(layer),
                                           decode_->make_impl(layer));
  }

 protected:
  // What neither backend's own capabilities say: their combination hooks, and the pairing.
  std::vector<std::string> check_combination(const SelectorConfig& config,
                                             const Platform& platform) const override {
    std::vector<std::string> reasons = pairing_reasons(*prefill_, *decode_, config);
    for (const auto& [phase, backend] :
         {std::pair{Phase::kPrefill, prefill_.get()}, std::pair{Phase::kDecode, decode_.get()}}) {
      const std::vector<std::string> own =
          validate_capabilities(backend->capabilities(), config, platform);
      for (const std::string& reason : backend->validate(config, platform)) {
        if (std::find(own.begin(), own.end(), reason) != own.end()) continue;
        reasons.push_back(
            fmt::format("{} backend {}: {}", to_string(phase), backend->name(), reason));
      }
    }
    return reasons;
  }

 private:
  std::shared_ptr<const AttentionBackend> prefill_, decode_;
  std::string name_, description_;
  BackendCapabilities caps_;
};

}  // namespace

PhaseSplit split_phases(const CommonAttentionMetadata& common) {
  PhaseSplit split;
  const auto query_len = [&](int i) {
    return common.query_start_loc[static_cast<size_t>(i) + 1] -
           common.query_start_loc[static_cast<size_t>(i)];
  };
  int i = 0;
  while (i < common.num_reqs && query_len(i) <= kDecodeQueryLen) ++i;
  split.num_decode_reqs = i;
  split.num_decode_tokens = common.query_start_loc[static_cast<size_t>(i)];
  for (int j = i; j < common.num_reqs; ++j) {
    if (query_len(j) <= kDecodeQueryLen) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("batch request {} is a decode (query length {}) after prefill "
                              "request {} (query length {}): a backend that splits prefill and "
                              "decode rows needs every decode request (query length <= {}) "
                              "first in the batch",
                              j, query_len(j), i, query_len(i), kDecodeQueryLen));
    }
  }
  split.num_prefill_reqs = common.num_reqs - split.num_decode_reqs;
  split.num_prefill_tokens = common.num_actual_tokens - split.num_decode_tokens;
  return split;
}

void slice_requests(const CommonAttentionMetadata& common, int first_req, int num_reqs,
                    CommonAttentionMetadata& out) {
  const auto first = static_cast<size_t>(first_req);
  const auto count = static_cast<size_t>(num_reqs);
  const int32_t token0 = common.query_start_loc[first];
  out.num_reqs = num_reqs;
  out.query_start_loc.resize(count + 1);
  for (size_t i = 0; i <= count; ++i) {
    out.query_start_loc[i] = common.query_start_loc[first + i] - token0;
  }
  out.num_actual_tokens = out.query_start_loc[count];
  out.seq_lens.assign(common.seq_lens.begin() + static_cast<ptrdiff_t>(first),
                      common.seq_lens.begin() + static_cast<ptrdiff_t>(first + count));
  const auto width = static_cast<size_t>(common.max_blocks_per_req);
  out.max_blocks_per_req = common.max_blocks_per_req;
  out.block_table.assign(
      common.block_table.begin() + static_cast<ptrdiff_t>(first * width),
      common.block_table.begin() + static_cast<ptrdiff_t>((first + count) * width));
  out.block_size = common.block_size;
  if (common.slot_mapping.empty()) {
    out.slot_mapping.clear();
  } else {
    out.slot_mapping.assign(
        common.slot_mapping.begin() + token0,
        common.slot_mapping.begin() + token0 + static_cast<ptrdiff_t>(out.num_actual_tokens));
  }
  out.max_query_len = 0;
  for (size_t i = 0; i < count; ++i) {
    out.max_query_len =
        std::max(out.max_query_len, out.query_start_loc[i + 1] - out.query_start_loc[i]);
  }
  out.max_seq_len =
      out.seq_lens.empty() ? 0 : *std::max_element(out.seq_lens.begin(), out.seq_lens.end());
  out.causal = common.causal;
  out.encoder_seq_lens.clear();
  out.null_block_id = common.null_block_id;
}

SizeRule intersect(const SizeRule& a, const SizeRule& b) {
  if (!a.exact.empty() || !b.exact.empty()) {
    const SizeRule& list = a.exact.empty() ? b : a;
    const SizeRule& other = a.exact.empty() ? a : b;
    std::vector<int> values;
    for (int v : list.exact) {
      if (other.allows(v)) values.push_back(v);
    }
    return values.empty() ? no_sizes() : SizeRule::list(std::move(values));
  }
  const int multiple = std::lcm(std::max(1, a.multiple_of), std::max(1, b.multiple_of));
  const int lo = std::max(a.min, b.min), hi = min_bound(a.max, b.max);
  if (hi > 0 && hi < lo) return no_sizes();
  return SizeRule::multiple(multiple, lo, hi);
}

std::vector<std::string> pairing_reasons(const AttentionBackend& prefill,
                                         const AttentionBackend& decode,
                                         const SelectorConfig& config) {
  std::vector<std::string> reasons;
  const BackendCapabilities& p = prefill.capabilities();
  const BackendCapabilities& d = decode.capabilities();
  if (config.state || !p.state_layer_types.empty() || !d.state_layer_types.empty()) {
    reasons.emplace_back(
        "prefill and decode rows are split for attention layers only, not state layers");
    return reasons;
  }
  if (p.platform != d.platform) {
    reasons.push_back(fmt::format("prefill backend {} runs on {}, decode backend {} on {}",
                                  prefill.name(), to_string(p.platform), decode.name(),
                                  to_string(d.platform)));
  }
  if (config.attn_type != AttentionType::kDecoder) {
    reasons.push_back(fmt::format(
        "prefill and decode rows are split for decoder self-attention only, not {} attention",
        to_string(config.attn_type)));
  }
  if (p.required_layout && d.required_layout && *p.required_layout != *d.required_layout) {
    reasons.push_back(
        fmt::format("KV layouts differ: prefill backend {} reads {}, decode "
                    "backend {} reads {}",
                    prefill.name(), to_string(*p.required_layout), decode.name(),
                    to_string(*d.required_layout)));
  }
  const SizeRule common_blocks = intersect(p.kernel_block_sizes, d.kernel_block_sizes);
  if (common_blocks.enumerate(1, 4096).empty()) {
    reasons.push_back(
        fmt::format("kernel block sizes do not agree: prefill backend {} takes {}, "
                    "decode backend {} takes {}",
                    prefill.name(), p.kernel_block_sizes.describe(), decode.name(),
                    d.kernel_block_sizes.describe()));
  } else if (config.block_size &&
             !(block_size_servable(p.kernel_block_sizes, *config.block_size) &&
               block_size_servable(d.kernel_block_sizes, *config.block_size))) {
    reasons.push_back(
        fmt::format("block size {} is not served by both: prefill backend {} takes "
                    "kernel blocks of {}, decode backend {} of {}",
                    *config.block_size, prefill.name(), p.kernel_block_sizes.describe(),
                    decode.name(), d.kernel_block_sizes.describe()));
  }
  return reasons;
}

std::string composite_name(std::string_view prefill, std::string_view decode) {
  return fmt::format("prefill:{}|decode:{}", prefill, decode);
}

std::shared_ptr<const AttentionBackend> make_composite_backend(
    std::shared_ptr<const AttentionBackend> prefill,
    std::shared_ptr<const AttentionBackend> decode) {
  ATTNKIT_CHECK(prefill != nullptr && decode != nullptr, "a composite needs two backends");
  return std::make_shared<CompositeBackend>(std::move(prefill), std::move(decode));
}

}  // namespace attnkit
