#include "mutant_backends.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "attnkit/core/numeric.h"
#include "backends/reference/reference_backend.h"

namespace attnkit::testing {
namespace {

// Truncates toward zero where round-to-nearest-even rounded away from zero.
uint8_t truncate_to_fp8(float x, ScalarType type) {
  const bool e4m3 = type == ScalarType::kFp8E4M3;
  uint8_t q = e4m3 ? float_to_fp8_e4m3(x) : float_to_fp8_e5m2(x);
  const float back = e4m3 ? fp8_e4m3_to_float(q) : fp8_e5m2_to_float(q);
  if (std::abs(back) > std::abs(x) && (q & 0x7f) != 0) --q;  // next smaller magnitude
  return q;
}

class MutantImpl final : public AttentionImpl {
 public:
  MutantImpl(Mutation mutation, const AttentionLayerParams& layer,
             const AttentionBackend& reference)
      : mutation_(mutation), layer_(layer), reference_(reference) {
    AttentionLayerParams inner = layer;
    if (mutation == Mutation::kIgnoresWindow) inner.sliding_window = 0;
    impl_ = reference.make_impl(inner);
  }
  std::string_view backend_name() const override { return "MUTANT"; }

  void forward(const TensorView& query, const TensorView& key, const TensorView& value,
               const KvCacheTensors& cache, const AttentionMetadata& metadata,
               const TensorView& output, const ExecutionContext& /*ctx*/) override {
    const CommonAttentionMetadata& common = metadata.common();
    if (mutation_ == Mutation::kTruncatingFp8 && is_fp8(layer_.kv_cache_dtype) && !key.empty()) {
      write_truncated(key, layer_.head_size, cache.key, layer_.k_scale, cache, common);
      if (!layer_.use_mla) {
        write_truncated(value, layer_.head_size_v, cache.value, layer_.v_scale, cache, common);
      }
      // Attend over what was written: the reference must not write again.
      no_write_ = common;
      no_write_.slot_mapping.assign(common.slot_mapping.size(), -1);
      builder_ = reference_.make_builder(KvCacheSpec{}, layer_);
      impl_->forward(query, key, value, cache, builder_->build(no_write_), output);
      return;
    }
    if (mutation_ == Mutation::kUnwrittenElement) {
      HostTensor scratch(output.dtype, std::span<const int64_t>(output.shape.data(), 3));
      impl_->forward(query, key, value, cache, metadata, scratch.view());
      const size_t elem = size_of(output.dtype);
      const int64_t n =
          static_cast<int64_t>(common.num_actual_tokens) * output.size(1) * output.size(2);
      std::memcpy(output.data, scratch.data(), static_cast<size_t>(n - 1) * elem);
      return;
    }
    impl_->forward(query, key, value, cache, metadata, output);
    if (mutation_ == Mutation::kWritesSpareBlock && !cache.key.empty()) {
      // The suite's spare blocks are the ones no block-table row names; pick the first.
      const int64_t blocks = cache.key.size(0);
      std::vector<bool> used(static_cast<size_t>(blocks), false);
      for (int32_t b : common.block_table) used[static_cast<size_t>(b)] = true;
      for (int64_t b = 0; b < blocks; ++b) {
        if (!used[static_cast<size_t>(b)]) {
          store_from_float(cache.key.data, cache.key.dtype, b * cache.key.stride(0), 0.5f);
          break;
        }
      }
    }
  }

 private:
  void write_truncated(const TensorView& src, int dim, const TensorView& dst, float scale,
                       const KvCacheTensors& cache, const CommonAttentionMetadata& common) {
    const bool nhd = cache.layout == KvLayout::kNHD;
    for (size_t t = 0; t < common.slot_mapping.size(); ++t) {
      const int64_t slot = common.slot_mapping[t];
      if (slot < 0) continue;
      const int64_t block = slot / cache.block_size, offset = slot % cache.block_size;
      for (int h = 0; h < layer_.num_kv_heads; ++h) {
        const int64_t base =
            nhd ? block * dst.stride(0) + offset * dst.stride(1) + h * dst.stride(2)
                : block * dst.stride(0) + h * dst.stride(1) + offset * dst.stride(2);
        for (int d = 0; d < dim; ++d) {
          const int64_t s =
              static_cast<int64_t>(t) * src.stride(0) + (src.ndim == 3 ? h * src.stride(1) : 0) + d;
          const float x = load_as_float(src.data, src.dtype, s) / scale;
          static_cast<uint8_t*>(dst.data)[base + d] = truncate_to_fp8(x, dst.dtype);
        }
      }
    }
  }

  Mutation mutation_;
  AttentionLayerParams layer_;
  const AttentionBackend& reference_;
  std::unique_ptr<AttentionImpl> impl_;
  CommonAttentionMetadata no_write_;
  std::unique_ptr<MetadataBuilder> builder_;
};

class WrappingBackend : public AttentionBackend {
 public:
  WrappingBackend(std::string name, BackendCapabilities caps)
      : name_(std::move(name)), caps_(std::move(caps)), reference_(make_reference_backend()) {}
  std::string_view name() const override { return name_; }
  std::string_view description() const override { return "REFERENCE, deliberately altered"; }
  const BackendCapabilities& capabilities() const override { return caps_; }
  std::unique_ptr<MetadataBuilder> make_builder(const KvCacheSpec& spec,
                                                const AttentionLayerParams& layer) const override {
    return reference_->make_builder(spec, layer);
  }

 protected:
  std::string name_;
  BackendCapabilities caps_;
  std::unique_ptr<AttentionBackend> reference_;
};

class MutantBackend final : public WrappingBackend {
 public:
  explicit MutantBackend(Mutation m)
      : WrappingBackend("MUTANT", make_reference_backend()->capabilities()), mutation_(m) {}
  std::unique_ptr<AttentionImpl> make_impl(const AttentionLayerParams& layer) const override {
    return std::make_unique<MutantImpl>(mutation_, layer, *reference_);
  }

 private:
  Mutation mutation_;
};

class DeclaringBackend final : public WrappingBackend {
 public:
  DeclaringBackend(BackendCapabilities caps, bool reject_fp8)
      : WrappingBackend("DECLARING", std::move(caps)), reject_fp8_(reject_fp8) {}
  std::unique_ptr<AttentionImpl> make_impl(const AttentionLayerParams& layer) const override {
    return reference_->make_impl(layer);
  }

 protected:
  std::vector<std::string> check_combination(const SelectorConfig& config,
                                             const Platform& /*platform*/) const override {
    if (reject_fp8_ && is_fp8(config.kv_cache_dtype)) return {"fp8 KV cache not in this build"};
    return {};
  }

 private:
  bool reject_fp8_;
};

}  // namespace

std::unique_ptr<AttentionBackend> make_mutant_backend(Mutation mutation) {
  return std::make_unique<MutantBackend>(mutation);
}

std::unique_ptr<AttentionBackend> make_declaring_backend(BackendCapabilities caps,
                                                         bool reject_fp8_in_hook) {
  return std::make_unique<DeclaringBackend>(std::move(caps), reject_fp8_in_hook);
}

}  // namespace attnkit::testing
