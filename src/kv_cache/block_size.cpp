#include "attnkit/kv_cache/block_size.h"

#include <fmt/format.h>

#include <algorithm>

namespace attnkit {
namespace {

std::string accepted_sizes(const AttentionBackend& backend) {
  return fmt::format(
      "kernel block sizes {}; a cache block size must be one of them or a "
      "multiple of one",
      backend.capabilities().kernel_block_sizes.describe());
}

std::string backend_list(std::span<const AttentionBackend* const> backends) {
  std::string out;
  for (const AttentionBackend* b : backends) {
    if (!out.empty()) out += ", ";
    out += fmt::format("{} (preferred {}, kernel block sizes {})", b->name(),
                       b->capabilities().preferred_block_size,
                       b->capabilities().kernel_block_sizes.describe());
  }
  return out;
}

}  // namespace

bool accepts_cache_block_size(const AttentionBackend& backend, int cache_block_size) {
  if (cache_block_size <= 0) return false;
  const SizeRule& rule = backend.capabilities().kernel_block_sizes;
  for (int s = cache_block_size; s >= 1; --s) {
    if (cache_block_size % s == 0 && rule.allows(s)) return true;
  }
  return false;
}

std::optional<int> common_kernel_block_size(std::span<const AttentionBackend* const> backends,
                                            int cache_block_size) {
  for (int s = cache_block_size; s >= 1; --s) {
    if (cache_block_size % s != 0) continue;
    const bool all = std::all_of(backends.begin(), backends.end(), [s](const AttentionBackend* b) {
      return b->capabilities().kernel_block_sizes.allows(s);
    });
    if (all) return s;
  }
  return std::nullopt;
}

GroupBlockSize choose_group_block_size(const KvCacheSpec& spec,
                                       std::span<const AttentionBackend* const> backends,
                                       std::optional<int> user_block_size,
                                       const std::string& what) {
  ATTNKIT_CHECK(!backends.empty(), "a KV-cache group needs at least one backend");
  if (user_block_size) {
    const int size = *user_block_size;
    if (size <= 0 || size > kMaxCacheBlockSize) {
      throw Error(
          ErrorCode::kInvalidArgument,
          fmt::format("block size {} is out of range (valid: 1..{})", size, kMaxCacheBlockSize));
    }
    for (const AttentionBackend* b : backends) {
      if (!accepts_cache_block_size(*b, size)) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("block size {} is not accepted by backend {} serving {}: {}", size,
                                b->name(), what, accepted_sizes(*b)));
      }
    }
    const std::optional<int> kernel = common_kernel_block_size(backends, size);
    if (!kernel) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("block size {} for {}: the backends serving it share no kernel "
                              "block size dividing it: {}",
                              size, what, backend_list(backends)));
    }
    return {size, *kernel, true};
  }
  int start = 1;
  for (const AttentionBackend* b : backends) start = std::max(start, b->preferred_block_size(spec));
  for (int size = start; size <= kMaxCacheBlockSize; ++size) {
    const bool all = std::all_of(
        backends.begin(), backends.end(),
        [size](const AttentionBackend* b) { return accepts_cache_block_size(*b, size); });
    if (!all) continue;
    if (const std::optional<int> kernel = common_kernel_block_size(backends, size)) {
      return {size, *kernel, false};
    }
  }
  throw Error(ErrorCode::kUnsupported,
              fmt::format("no cache block size in {}..{} suits every backend serving {}: {}", start,
                          kMaxCacheBlockSize, what, backend_list(backends)));
}

}  // namespace attnkit
