#pragma once
// Choosing a KV-cache group's block size from the backends that serve it.
//
// Two sizes matter:
//   cache block size S  - tokens per block of the block pool (what block tables count in
//                         the KV-cache manager, and what page sizes are computed from);
//   kernel block size s - tokens per block the kernels index. s divides S: one cache block
//                         is viewed as S/s "virtual" kernel blocks of the same memory, and
//                         cache block b becomes kernel blocks b*(S/s) + j, j = 0..S/s-1.
// A backend accepts S when its kernel_block_sizes allow S itself or any s that divides S.
//
// Rule per group:
//   - a user block size wins if every backend of the group accepts it, else Error naming
//     the size, the backend and the kernel block sizes it accepts;
//   - otherwise the smallest S >= the largest preferred_block_size(spec) of the group's
//     backends that every backend accepts (e.g. preferences 16 and 32 -> 32 when the
//     16-backend's kernels take 16: it then sees each 32-token block as two 16-blocks);
//   - s is the largest size that divides S and every backend's kernels allow (S itself
//     when possible, so no splitting happens needlessly).

#include <optional>
#include <span>
#include <string>

#include "attnkit/backend/backend.h"
#include "attnkit/export.h"

namespace attnkit {

struct ATTNKIT_API GroupBlockSize {
  int cache_block_size = 0;
  int kernel_block_size = 0;
  bool from_user = false;  // the user's block size was taken
};

// True when `backend` can run cache blocks of `cache_block_size` tokens (directly or as
// several kernel blocks).
ATTNKIT_API bool accepts_cache_block_size(const AttentionBackend& backend, int cache_block_size);

// The largest kernel block size that divides `cache_block_size` and every backend's
// kernels allow; nullopt when there is none.
ATTNKIT_API std::optional<int> common_kernel_block_size(
    std::span<const AttentionBackend* const> backends, int cache_block_size);

// The block sizes of one group whose layers have `spec` (block size ignored) and are
// served by `backends` (distinct, non-null, at least one). `what` names the group in
// error messages (e.g. "sliding_window(512) layers 0-4"). Throws Error(kInvalidArgument)
// for a user size some backend rejects, Error(kUnsupported) when no size fits them all.
ATTNKIT_API GroupBlockSize
choose_group_block_size(const KvCacheSpec& spec, std::span<const AttentionBackend* const> backends,
                        std::optional<int> user_block_size, const std::string& what);

// Largest cache block size attnkit plans (bounds the search and page-size unification).
inline constexpr int kMaxCacheBlockSize = 4096;
// Largest attention block size planned for a hybrid model, whose attention pages grow to
// hold a recurrent state (a 56B Mamba2 layer keeps 17 MB per request).
inline constexpr int kMaxHybridBlockSize = 1 << 16;

}  // namespace attnkit
