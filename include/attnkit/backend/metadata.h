#pragma once
// Per-step metadata. The runtime builds one CommonAttentionMetadata per KV-cache group per
// step; the group's backend turns it into its own plan (AttentionMetadata) once, and every
// layer of the group reuses that plan in forward().

#include <cstddef>
#include <cstdint>
#include <vector>

#include "attnkit/core/execution.h"
#include "attnkit/export.h"

namespace attnkit {

// Host-side, per KV-cache group, per step. B = num_reqs.
struct ATTNKIT_API CommonAttentionMetadata {
  int num_reqs = 0;
  // Tokens of this step, over all requests: query_start_loc[num_reqs].
  int num_actual_tokens = 0;
  // [B + 1]: request i's new tokens are rows query_start_loc[i] .. query_start_loc[i+1]-1
  // of q/k/v/out; query_start_loc[0] = 0.
  std::vector<int32_t> query_start_loc;
  // [B]: tokens request i attends over after this step's tokens are added (computed +
  // new); for cross attention, the encoder length.
  std::vector<int32_t> seq_lens;
  // [B, max_blocks_per_req], row-major: physical block ids (in kernel-block units, i.e.
  // after virtual splitting) of request i's tokens in order; unused entries hold
  // null_block_id.
  std::vector<int32_t> block_table;
  int max_blocks_per_req = 0;
  // Kernel block size the block table is expressed in: the KV-cache group's
  // kernel_block_size (KvCacheGroup, the one source), as build_common_metadata() copies
  // it; forward() rejects a value other than its KvCacheTensors::block_size.
  int block_size = 0;
  // One entry per row of the fresh key/value tensors passed to forward(): the cache slot
  // (block * block_size + offset) where that row's K/V is written; -1 = do not write.
  //   decoder kinds: [num_actual_tokens], row t = this step's token t;
  //   encoder-only:  [num_actual_tokens] of -1 (no cache);
  //   cross:         one entry per ENCODER token of the requests whose encoder K/V is
  //                  written this step, in batch order (positions 0..encoder_len-1);
  //                  empty once every encoder K/V is cached (forward gets empty key/value).
  // So for cross attention its length is NOT num_actual_tokens (the decoder queries).
  std::vector<int64_t> slot_mapping;
  int max_query_len = 0;
  int max_seq_len = 0;
  bool causal = true;
  // [B], cross attention only: encoder length of each request (= seq_lens there).
  std::vector<int32_t> encoder_seq_lens;
  int32_t null_block_id = 0;
};

// A backend's plan for one step of one KV-cache group (work partitioning, split-KV chunks,
// scratch sizes, device copies of the common metadata). Owned by the builder that made it.
class ATTNKIT_API AttentionMetadata {
 public:
  virtual ~AttentionMetadata() = default;
  // The common metadata this plan was built from (valid while the plan is).
  virtual const CommonAttentionMetadata& common() const = 0;
};

class ATTNKIT_API MetadataBuilder {
 public:
  virtual ~MetadataBuilder() = default;

  // Device memory reserve(limits) needs for steps within `limits` (0: the builder keeps
  // nothing on a device, e.g. CPU backends).
  virtual size_t workspace_bytes(const StepLimits& /*limits*/) const { return 0; }
  // The one-time allocation of the execution contract (core/execution.h): after it, build()
  // of a step within `limits` allocates nothing, and a step beyond them is refused with the
  // bound it passes. `workspace` is device memory of at least workspace_bytes(limits) that
  // the caller owns and keeps alive while the builder is used, or nullptr (the builder
  // allocates it). Without reserve(), build() grows its buffers as steps need (not usable
  // with graph_shape). Default: nothing to reserve.
  virtual void reserve(const StepLimits& /*limits*/, void* /*workspace*/ = nullptr) {}

  // Plans one step; a device backend uploads the plan on ctx.stream (asynchronously: the
  // host staging it copies from is kept until that copy has run). The returned plan stays
  // valid until the next build() on this builder and may refer to `common`, which the
  // caller keeps alive (unchanged) for that long.
  virtual const AttentionMetadata& build(const CommonAttentionMetadata& common,
                                         const ExecutionContext& ctx = {}) = 0;
};

}  // namespace attnkit
