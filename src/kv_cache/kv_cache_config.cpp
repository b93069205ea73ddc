#include "attnkit/kv_cache/kv_cache_config.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "attnkit/kv_cache/block_size.h"

namespace attnkit {
namespace {

// Layers whose specs are equal once the block size is ignored.
struct Bucket {
  KvCacheSpec spec;  // block_size set by choose_group_block_size / unification
  std::vector<const LayerKvInput*> layers;
  std::vector<const AttentionBackend*> backends;  // distinct, first-use order
  GroupBlockSize block;
};

// "0-4,6,8-9"
std::string layer_ranges(const std::vector<const LayerKvInput*>& layers) {
  std::string out;
  size_t i = 0;
  while (i < layers.size()) {
    size_t j = i;
    while (j + 1 < layers.size() && layers[j + 1]->layer_index == layers[j]->layer_index + 1) ++j;
    if (!out.empty()) out += ",";
    out += j == i ? fmt::format("{}", layers[i]->layer_index)
                  : fmt::format("{}-{}", layers[i]->layer_index, layers[j]->layer_index);
    i = j + 1;
  }
  return out;
}

std::string bucket_name(const Bucket& b) {
  return fmt::format("{} layers {}", to_string(b.spec.kind), layer_ranges(b.layers));
}

std::vector<Bucket> make_buckets(std::span<const LayerKvInput> layers,
                                 std::vector<LayerKvInput>& customized) {
  std::set<int> seen;
  customized.reserve(layers.size());
  for (const LayerKvInput& in : layers) {
    if (in.backend == nullptr) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("KV cache plan: layer {} has no backend", in.layer_index));
    }
    if (!seen.insert(in.layer_index).second) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("KV cache plan: layer {} is listed twice", in.layer_index));
    }
    LayerKvInput out = in;
    out.spec = in.backend->customize_spec(in.spec);
    out.spec.block_size = 0;  // chosen per group below
    customized.push_back(out);
  }
  std::sort(customized.begin(), customized.end(), [](const LayerKvInput& a, const LayerKvInput& b) {
    return a.layer_index < b.layer_index;
  });
  std::vector<Bucket> buckets;
  for (const LayerKvInput& layer : customized) {
    auto it = std::find_if(buckets.begin(), buckets.end(),
                           [&](const Bucket& b) { return b.spec == layer.spec; });
    if (it == buckets.end()) {
      buckets.push_back(Bucket{layer.spec, {}, {}, {}});
      it = std::prev(buckets.end());
    }
    it->layers.push_back(&layer);
    if (std::find(it->backends.begin(), it->backends.end(), layer.backend) == it->backends.end()) {
      it->backends.push_back(layer.backend);
    }
  }
  return buckets;
}

// Rule 3: scale block sizes so every cache bucket has the same page size.
size_t unify_page_sizes(std::vector<Bucket*>& cached, int max_block_size) {
  size_t page = 1;
  std::string pages;  // for error messages, before any scaling
  for (const Bucket* b : cached) {
    page = std::lcm(page, b->spec.page_size_bytes());
    pages += fmt::format("{}{}: {} B", pages.empty() ? "" : "; ", bucket_name(*b),
                         b->spec.page_size_bytes());
  }
  for (Bucket* b : cached) {
    const size_t own = b->spec.page_size_bytes();
    const size_t factor = page / own;
    if (factor == 1) continue;
    const size_t scaled = static_cast<size_t>(b->spec.block_size) * factor;
    if (scaled > static_cast<size_t>(max_block_size)) {
      throw Error(ErrorCode::kUnsupported,
                  fmt::format("cannot unify KV-cache page sizes ({}): {} would need block size "
                              "{} (> {})",
                              pages, bucket_name(*b), scaled, max_block_size));
    }
    const int size = static_cast<int>(scaled);
    // Every backend accepted the old size through a kernel block size s dividing it; s
    // divides the scaled size too, so the scaled size is accepted and s still fits.
    const std::optional<int> kernel = common_kernel_block_size(b->backends, size);
    ATTNKIT_CHECK(kernel.has_value(), "a scaled block size lost its kernel block size");
    b->spec.block_size = size;
    b->block.kernel_block_size = *kernel;
  }
  return page;
}

// State layers (vLLM's hybrid rule): one block holds one request's whole state, so the
// pool's page must be at least the largest state. Attention block sizes grow by whole
// multiples until their pages reach it (vLLM grows the attention block size the same
// way); unify_page_sizes() then makes the attention pages equal, and every state page is
// padded up to that page.
void grow_blocks_to_state(std::vector<Bucket*>& cached, size_t state_page) {
  for (Bucket* b : cached) {
    const size_t own = b->spec.page_size_bytes();
    const size_t factor = (state_page + own - 1) / own;
    if (factor <= 1) continue;
    const size_t scaled = static_cast<size_t>(b->spec.block_size) * factor;
    if (scaled > static_cast<size_t>(kMaxHybridBlockSize)) {
      throw Error(ErrorCode::kUnsupported,
                  fmt::format("cannot hold a {} B recurrent state in one cache page: {} ({} B "
                              "per token) would need block size {} (> {})",
                              state_page, bucket_name(*b), b->spec.bytes_per_token(), scaled,
                              kMaxHybridBlockSize));
    }
    const int size = static_cast<int>(scaled);
    const std::optional<int> kernel = common_kernel_block_size(b->backends, size);
    ATTNKIT_CHECK(kernel.has_value(), "a grown block size lost its kernel block size");
    b->spec.block_size = size;
    b->block.kernel_block_size = *kernel;
  }
}

KvCacheGroup make_group(const Bucket& bucket, const std::vector<const LayerKvInput*>& layers) {
  KvCacheGroup g;
  g.spec = bucket.spec;
  g.kernel_block_size = bucket.block.kernel_block_size;
  g.chosen_block_size = bucket.block.cache_block_size;
  g.user_block_size = bucket.block.from_user;
  for (const LayerKvInput* l : layers) {
    g.layer_indices.push_back(l->layer_index);
    g.layer_backends.emplace_back(l->backend->name());
    g.layer_layouts.push_back(l->backend->kv_layout());
  }
  return g;
}

}  // namespace

std::vector<std::string> KvCacheGroup::backend_names() const {
  std::vector<std::string> out;
  for (const std::string& name : layer_backends) {
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  }
  return out;
}

int KvCacheConfig::num_blocks_for_bytes(size_t bytes) const {
  if (bytes_per_block() == 0) return 0;
  const size_t blocks = bytes / bytes_per_block();
  return static_cast<int>(std::min<size_t>(blocks, static_cast<size_t>(INT32_MAX)));
}

const KvCacheGroup& KvCacheConfig::group_of_layer(int layer_index, int* buffer_index) const {
  for (const KvCacheGroup& g : groups) {
    for (size_t j = 0; j < g.layer_indices.size(); ++j) {
      if (g.layer_indices[j] == layer_index) {
        if (buffer_index != nullptr) *buffer_index = static_cast<int>(j);
        return g;
      }
    }
  }
  throw Error(ErrorCode::kNotFound, fmt::format("layer {} is in no KV-cache group ({} groups)",
                                                layer_index, groups.size()));
}

std::string KvCacheConfig::describe() const {
  std::string out;
  for (const KvCacheGroup& g : groups) {
    std::string layers;
    for (int l : g.layer_indices) layers += fmt::format("{}{}", layers.empty() ? "" : ",", l);
    std::string backends;
    for (const std::string& b : g.backend_names()) {
      backends += fmt::format("{}{}", backends.empty() ? "" : ",", b);
    }
    out += fmt::format("group {}: {} layers [{}] backends [{}]", g.group_id, g.spec.describe(),
                       layers, backends);
    if (g.spec.is_state()) {
      out += " one block per request";
    } else if (g.has_cache()) {
      out += fmt::format(" kernel block {}", g.kernel_block_size);
      if (g.chosen_block_size != g.spec.block_size) {
        out += fmt::format(" (block size {} scaled to unify page size)", g.chosen_block_size);
      }
    }
    out += "\n";
  }
  out += fmt::format("page size {} B, {} buffers, {} B per block\n", page_size_bytes, num_buffers,
                     bytes_per_block());
  return out;
}

KvCacheConfig plan_kv_cache(std::span<const LayerKvInput> layers,
                            std::optional<int> user_block_size) {
  std::vector<LayerKvInput> customized;
  std::vector<Bucket> buckets = make_buckets(layers, customized);

  std::vector<Bucket*> cached;  // attention buckets with a cache
  std::vector<Bucket*> states;  // state buckets: one block per request
  size_t state_page = 0;
  for (Bucket& b : buckets) {
    if (!b.spec.has_cache()) continue;
    if (b.spec.is_state()) {
      b.spec.block_size = 1;
      b.block = GroupBlockSize{1, 1, false};
      constexpr size_t kAlign = 16;  // every state view's dtype divides the page
      state_page = std::max(state_page, (b.spec.state_bytes() + kAlign - 1) / kAlign * kAlign);
      states.push_back(&b);
      continue;
    }
    b.block = choose_group_block_size(b.spec, b.backends, user_block_size, bucket_name(b));
    b.spec.block_size = b.block.cache_block_size;
    cached.push_back(&b);
  }

  KvCacheConfig config;
  if (!cached.empty()) {
    if (state_page > 0) grow_blocks_to_state(cached, state_page);
    config.page_size_bytes =
        unify_page_sizes(cached, state_page > 0 ? kMaxHybridBlockSize : kMaxCacheBlockSize);
  } else {
    config.page_size_bytes = state_page;
  }
  cached.insert(cached.end(), states.begin(), states.end());

  // Rule 4: equal-size groups.
  size_t group_size = 0;
  if (!cached.empty()) {
    size_t min_layers = SIZE_MAX, max_layers = 0;
    for (const Bucket* b : cached) {
      min_layers = std::min(min_layers, b->layers.size());
      max_layers = std::max(max_layers, b->layers.size());
    }
    group_size = 4 * max_layers < 5 * min_layers ? max_layers : min_layers;
    config.num_buffers = static_cast<int>(group_size);
  }

  for (const Bucket& b : buckets) {
    if (!b.spec.has_cache()) {
      config.groups.push_back(make_group(b, b.layers));
      continue;
    }
    const size_t n = b.layers.size();
    const size_t k = (n + group_size - 1) / group_size;
    for (size_t i = 0; i < k; ++i) {
      std::vector<const LayerKvInput*> part;
      for (size_t j = i; j < n; j += k) part.push_back(b.layers[j]);
      config.groups.push_back(make_group(b, part));
    }
  }
  std::sort(config.groups.begin(), config.groups.end(),
            [](const KvCacheGroup& a, const KvCacheGroup& b) {
              return a.layer_indices.front() < b.layer_indices.front();
            });
  for (size_t i = 0; i < config.groups.size(); ++i) config.groups[i].group_id = static_cast<int>(i);
  return config;
}

}  // namespace attnkit
