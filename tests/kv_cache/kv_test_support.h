#pragma once
// Test helpers: a configurable fake backend (only what the KV-cache planner reads) and the
// per-layer specs of real models, built by hand from models/*.json.

#include <memory>
#include <string>
#include <vector>

#include "attnkit/backend/backend.h"
#include "attnkit/kv_cache/kv_cache_config.h"
#include "attnkit/kv_cache/spec_factory.h"

namespace attnkit::testing {

class FakeBackend final : public AttentionBackend {
 public:
  FakeBackend(std::string name, SizeRule kernel_block_sizes, int preferred_block_size,
              KvLayout layout = KvLayout::kNHD)
      : name_(std::move(name)) {
    caps_.kernel_block_sizes = std::move(kernel_block_sizes);
    caps_.preferred_block_size = preferred_block_size;
    caps_.required_layout = layout;
  }
  std::string_view name() const override { return name_; }
  std::string_view description() const override { return "fake backend for KV-cache tests"; }
  const BackendCapabilities& capabilities() const override { return caps_; }
  std::unique_ptr<MetadataBuilder> make_builder(const KvCacheSpec&,
                                                const AttentionLayerParams&) const override {
    throw Error(ErrorCode::kUnsupported, "FakeBackend has no metadata builder");
  }
  std::unique_ptr<AttentionImpl> make_impl(const AttentionLayerParams&) const override {
    throw Error(ErrorCode::kUnsupported, "FakeBackend has no implementation");
  }

 private:
  std::string name_;
  BackendCapabilities caps_;
};

inline KvHeadShape bf16_heads(int kv_heads, int head_size) {
  return KvHeadShape{kv_heads, head_size, head_size, ScalarType::kBFloat16};
}

// Gemma-3-1B (models/gemma-3-1b-it.json): 26 layers, 1 KV head of 256, window 512,
// sliding_window_pattern 6: layer i is full attention when (i + 1) % 6 == 0.
inline std::vector<KvCacheSpec> gemma3_1b_specs() {
  std::vector<KvCacheSpec> specs;
  for (int i = 0; i < 26; ++i) {
    specs.push_back((i + 1) % 6 == 0 ? full_attention_spec(bf16_heads(1, 256))
                                     : sliding_window_spec(bf16_heads(1, 256), 512));
  }
  return specs;
}

// Llama-3.1-8B: 32 layers, 8 KV heads of 128 (hidden 4096 / 32 heads).
inline std::vector<KvCacheSpec> llama31_8b_specs() {
  return std::vector<KvCacheSpec>(32, full_attention_spec(bf16_heads(8, 128)));
}

// DeepSeek-V2-Lite: 27 MLA layers, kv_lora_rank 512 + qk_rope_head_dim 64 = 576.
inline std::vector<KvCacheSpec> deepseek_v2_lite_specs() {
  return std::vector<KvCacheSpec>(27, mla_spec(512, 64, ScalarType::kBFloat16));
}

// gpt-oss-20b: 24 layers, 8 KV heads of 64, layer_types alternate sliding (window 128) /
// full, every layer has learned sink logits, which do not change the kind.
inline std::vector<KvCacheSpec> gpt_oss_20b_specs() {
  std::vector<KvCacheSpec> specs;
  for (int i = 0; i < 24; ++i) {
    specs.push_back(i % 2 == 0 ? sliding_window_spec(bf16_heads(8, 64), 128)
                               : full_attention_spec(bf16_heads(8, 64)));
  }
  return specs;
}

// Every layer served by `backend`.
inline std::vector<LayerKvInput> layers_with(const std::vector<KvCacheSpec>& specs,
                                             const AttentionBackend& backend) {
  std::vector<LayerKvInput> out;
  for (size_t i = 0; i < specs.size(); ++i)
    out.push_back({static_cast<int>(i), specs[i], &backend});
  return out;
}

}  // namespace attnkit::testing
