// The state backends' plan (the common metadata, checked) and implementation. forward()
// takes each request's rows, continues its state in its one cache block (zeroed when the
// request starts, c = seq_len - q = 0), and writes the outputs; nothing is written per
// token (the slot mapping is all -1).

#include "backends/state_reference/state_reference_impl.h"

#include <fmt/format.h>

#include <cstring>
#include <vector>

#include "attnkit/core/numeric.h"
#include "backend/state_ops.h"

namespace attnkit {
namespace {

[[noreturn]] void fail(std::string_view backend, int layer, const std::string& what) {
  throw Error(ErrorCode::kInvalidArgument, fmt::format("{} (layer {}): {}", backend, layer, what));
}

class StatePlan final : public AttentionMetadata {
 public:
  const CommonAttentionMetadata& common() const override { return *common_; }
  void reset(const CommonAttentionMetadata& common) { common_ = &common; }

 private:
  const CommonAttentionMetadata* common_ = nullptr;
};

void check_state_metadata(const CommonAttentionMetadata& m, std::string_view backend, int layer) {
  const auto b = static_cast<size_t>(m.num_reqs);
  if (m.num_reqs < 0 || m.query_start_loc.size() != b + 1 || m.seq_lens.size() != b) {
    fail(backend, layer,
         fmt::format("metadata of {} requests needs {} query_start_loc and {} seq_lens entries, "
                     "got {} and {}",
                     m.num_reqs, b + 1, b, m.query_start_loc.size(), m.seq_lens.size()));
  }
  if (m.num_reqs > 0 && (m.max_blocks_per_req != 1 || m.block_table.size() != b)) {
    fail(backend, layer,
         fmt::format("a state group's block table holds one state block per request; got {} "
                     "per request ({} entries for {} requests)",
                     m.max_blocks_per_req, m.block_table.size(), m.num_reqs));
  }
  for (size_t i = 0; i < b; ++i) {
    const int q = m.query_start_loc[i + 1] - m.query_start_loc[i];
    if (q < 0 || m.seq_lens[i] < q) {
      fail(backend, layer,
           fmt::format("request {}: {} new tokens with seq_len {} (need 0 <= new <= seq_len)", i, q,
                       m.seq_lens[i]));
    }
  }
  if (m.query_start_loc.empty() || m.query_start_loc.front() != 0 ||
      m.query_start_loc.back() != m.num_actual_tokens) {
    fail(backend, layer,
         fmt::format("query_start_loc must run from 0 to num_actual_tokens ({})",
                     m.num_actual_tokens));
  }
}

class StateBuilder final : public MetadataBuilder {
 public:
  StateBuilder(const AttentionLayerParams& layer, std::string_view backend)
      : layer_(layer.layer_index), backend_(backend) {}
  const AttentionMetadata& build(const CommonAttentionMetadata& common,
                                 const ExecutionContext& /*ctx*/) override {
    check_state_metadata(common, backend_, layer_);
    plan_.reset(common);
    return plan_;
  }

 private:
  int layer_ = 0;
  std::string_view backend_;
  StatePlan plan_;
};

// Where a request's state lives inside its block (storage: make_state_cache_view).
float* state_in_block(const TensorView& view, int32_t block) {
  if (view.data == nullptr) return nullptr;
  return static_cast<float*>(view.data) + static_cast<int64_t>(block) * view.stride(0);
}

class StateImpl final : public AttentionImpl {
 public:
  StateImpl(const AttentionLayerParams& layer, std::string_view backend)
      : layer_(layer), dims_(*layer.state), backend_(backend) {}
  std::string_view backend_name() const override { return backend_; }

  void forward(const TensorView& input, const TensorView& /*key*/, const TensorView& /*value*/,
               const KvCacheTensors& cache, const AttentionMetadata& metadata,
               const TensorView& output, const ExecutionContext& /*ctx*/) override {
    const CommonAttentionMetadata& m = metadata.common();
    check(input, output, cache, m);
    const int in_w = dims_.input_width();
    const int out_w = dims_.output_width();
    std::vector<float> in, out;
    for (int i = 0; i < m.num_reqs; ++i) {
      const auto ui = static_cast<size_t>(i);
      const int first = m.query_start_loc[ui];
      const int q = m.query_start_loc[ui + 1] - first;
      if (q == 0) continue;
      const int computed = m.seq_lens[ui] - q;
      const int32_t block = m.block_table[ui];
      float* conv = state_in_block(cache.key, block);
      float* rec = state_in_block(cache.value, block);
      if (computed == 0) {
        // A fresh request (or one recomputed after preemption) starts from zero.
        if (conv) std::memset(conv, 0, dims_.conv_elems() * sizeof(float));
        if (rec) std::memset(rec, 0, dims_.recurrent_elems() * sizeof(float));
      }
      in.resize(static_cast<size_t>(q) * static_cast<size_t>(in_w));
      out.resize(static_cast<size_t>(q) * static_cast<size_t>(out_w));
      for (int t = 0; t < q; ++t) {
        for (int c = 0; c < in_w; ++c) {
          in[static_cast<size_t>(t) * static_cast<size_t>(in_w) + static_cast<size_t>(c)] =
              load_as_float(input.data, input.dtype,
                            static_cast<int64_t>(first + t) * input.stride(0) + c);
        }
      }
      run_state_layer(dims_, layer_.state_params, q, computed, in.data(), out.data(), conv, rec);
      for (int t = 0; t < q; ++t) {
        for (int c = 0; c < out_w; ++c) {
          store_from_float(
              output.data, output.dtype, static_cast<int64_t>(first + t) * output.stride(0) + c,
              out[static_cast<size_t>(t) * static_cast<size_t>(out_w) + static_cast<size_t>(c)]);
        }
      }
    }
  }

 private:
  void check(const TensorView& input, const TensorView& output, const KvCacheTensors& cache,
             const CommonAttentionMetadata& m) const {
    const int layer = layer_.layer_index;
    const ScalarType dtype = scalar_type_of(layer_.dtype);
    auto check_rows = [&](const TensorView& v, std::string_view what, int width) {
      if (v.ndim != 2 || v.size(0) != m.num_actual_tokens || v.size(1) != width ||
          v.stride(1) != 1 || v.dtype != dtype || v.data == nullptr) {
        fail(backend_, layer,
             fmt::format("{} must be {}[{}, {}] with contiguous rows, got {}", what,
                         to_string(dtype), m.num_actual_tokens, width, v.describe()));
      }
    };
    check_rows(input, "input", dims_.input_width());
    check_rows(output, "output", dims_.output_width());
    if (layer_.state_params.empty()) {
      fail(backend_, layer,
           "the layer has no parameters: set them (AttentionStack::set_state_params; "
           "docs/state_layers.md lists the segments)");
    }
    const bool conv_ok = dims_.conv_elems() == 0 || cache.key.data != nullptr;
    const bool rec_ok = dims_.recurrent_elems() == 0 || cache.value.data != nullptr;
    if (!conv_ok || !rec_ok || cache.block_size != 1) {
      fail(backend_, layer, "the cache views are not a state layer's (make_state_cache_view)");
    }
    const int64_t blocks = cache.key.data != nullptr ? cache.key.size(0) : cache.value.size(0);
    for (size_t i = 0; i < m.block_table.size(); ++i) {
      const int32_t b = m.block_table[i];
      if (b <= 0 || b >= blocks) {
        fail(backend_, layer,
             fmt::format("request {}: state block {} is not a block of the cache (valid: 1..{})", i,
                         b, blocks - 1));
      }
    }
  }

  AttentionLayerParams layer_;
  StateLayerDims dims_;
  std::string_view backend_;
};

}  // namespace

std::unique_ptr<MetadataBuilder> make_state_builder(const AttentionLayerParams& layer,
                                                    std::string_view backend) {
  return std::make_unique<StateBuilder>(layer, backend);
}

std::unique_ptr<AttentionImpl> make_state_impl(const AttentionLayerParams& layer,
                                               std::string_view backend) {
  if (!layer.state) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{} (layer {}): serves state layers only, and this layer is attention",
                            backend, layer.layer_index));
  }
  if (!layer.state_params.empty()) {
    if (std::string problem = state_params_problem(*layer.state, layer.state_params);
        !problem.empty()) {
      fail(backend, layer.layer_index, problem);
    }
  }
  return std::make_unique<StateImpl>(layer, backend);
}

}  // namespace attnkit
