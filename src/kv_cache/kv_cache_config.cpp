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
size_t unify_page_sizes(std::vector<Bucket*>& cached) {
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
    if (scaled > static_cast<size_t>(kMaxCacheBlockSize)) {
      throw Error(ErrorCode::kUnsupported,
                  fmt::format("cannot unify KV-cache page sizes ({}): {} would need block size "
                              "{} (> {})",
                              pages, bucket_name(*b), scaled, kMaxCacheBlockSize));
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
    if (g.has_cache()) {
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

  std::vector<Bucket*> cached;
  for (Bucket& b : buckets) {
    if (!b.spec.has_cache()) continue;
    b.block = choose_group_block_size(b.spec, b.backends, user_block_size, bucket_name(b));
    b.spec.block_size = b.block.cache_block_size;
    cached.push_back(&b);
  }

  KvCacheConfig config;
  if (!cached.empty()) config.page_size_bytes = unify_page_sizes(cached);

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
