#include "attnkit/kv_cache/common_metadata_builder.h"

#include <fmt/format.h>

#include <algorithm>

#include "attnkit/kv_cache/block_pool.h"

namespace attnkit {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Request i's block-table row in kernel blocks, unpadded.
std::vector<int32_t> kernel_row(const KvCacheGroup& group, const ScheduledRequest& r, size_t i,
                                int seq_len) {
  const int ratio = group.kernel_blocks_per_block();
  const int64_t needed = ceil_div(seq_len, group.kernel_block_size);
  const int64_t available = static_cast<int64_t>(r.block_table.size()) * ratio;
  if (needed > available) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("request {} of the batch: group {} needs {} tokens of cache but its "
                            "block table covers {} (allocate slots first)",
                            i, group.group_id, seq_len,
                            static_cast<int64_t>(r.block_table.size()) * group.cache_block_size()));
  }
  std::vector<int32_t> row(static_cast<size_t>(needed));
  for (int64_t k = 0; k < needed; ++k) {
    const int32_t b = r.block_table[static_cast<size_t>(k / ratio)];
    row[static_cast<size_t>(k)] = b == BlockPool::kNullBlock
                                      ? BlockPool::kNullBlock
                                      : b * ratio + static_cast<int32_t>(k % ratio);
  }
  return row;
}

int64_t slot_of(const KvCacheGroup& group, const ScheduledRequest& r, size_t i, int position) {
  const int size = group.cache_block_size();
  const int32_t b = r.block_table[static_cast<size_t>(position / size)];
  if (b < 0) {
    // Found by fuzzing: a negative id made a negative slot, which means "do not write".
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("request {} of the batch: block table entry {} is {}, a negative "
                            "block id (valid ids are >= 1; 0 is the null block)",
                            i, position / size, b));
  }
  if (b == BlockPool::kNullBlock) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("request {} of the batch: position {} in group {} maps to the null "
                            "block (released or never allocated)",
                            i, position, group.group_id));
  }
  return static_cast<int64_t>(b) * size + position % size;
}

}  // namespace

CommonAttentionMetadata build_common_metadata(const KvCacheGroup& group,
                                              std::span<const ScheduledRequest> batch) {
  const KvCacheKind kind = group.spec.kind;
  const bool cross = kind == KvCacheKind::kCrossAttention;
  const bool cached = group.has_cache();
  if (group.spec.is_state() && !group.spec.state) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("group {} is a mamba (state) group without state dimensions: its "
                            "spec must carry the layer's StateLayerDims",
                            group.group_id));
  }
  CommonAttentionMetadata m;
  m.num_reqs = static_cast<int>(batch.size());
  m.causal = cached && !cross;
  m.block_size = cached ? group.kernel_block_size : 0;
  m.null_block_id = BlockPool::kNullBlock;
  m.query_start_loc.reserve(batch.size() + 1);
  m.query_start_loc.push_back(0);
  m.seq_lens.reserve(batch.size());

  std::vector<std::vector<int32_t>> rows(batch.size());
  for (size_t i = 0; i < batch.size(); ++i) {
    const ScheduledRequest& r = batch[i];
    if (r.num_computed_tokens < 0 || r.num_new_tokens < 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("request {} of the batch: computed tokens {} and new tokens {} "
                              "must be >= 0",
                              i, r.num_computed_tokens, r.num_new_tokens));
    }
    const int q = r.num_new_tokens;
    m.query_start_loc.push_back(m.query_start_loc.back() + q);
    m.max_query_len = std::max(m.max_query_len, q);
    int seq_len = r.num_computed_tokens + q;
    if (!cached) {
      if (r.num_computed_tokens != 0) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("request {} of the batch: encoder-only group {} has no cache, so "
                                "its {} computed tokens cannot be attended to (send the whole "
                                "sequence in one step)",
                                i, group.group_id, r.num_computed_tokens));
      }
      for (int t = 0; t < q; ++t) m.slot_mapping.push_back(-1);
    } else if (group.spec.is_state()) {
      // One block per request holds its state; nothing is written per token. The state
      // backend reads c = seq_len - q to know whether the request starts fresh (c = 0).
      if (r.block_table.size() != 1 || r.block_table[0] <= BlockPool::kNullBlock) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("request {} of the batch: state group {} needs exactly one "
                                "allocated state block, its table has {} (allocate slots first)",
                                i, group.group_id, r.block_table.size()));
      }
      rows[i] = {r.block_table[0]};
      for (int t = 0; t < q; ++t) m.slot_mapping.push_back(-1);
    } else if (cross) {
      if (r.encoder_len <= 0) {
        throw Error(ErrorCode::kInvalidArgument,
                    fmt::format("request {} of the batch: cross-attention group {} needs an "
                                "encoder length > 0, got {}",
                                i, group.group_id, r.encoder_len));
      }
      seq_len = r.encoder_len;
      m.encoder_seq_lens.push_back(seq_len);
      rows[i] = kernel_row(group, r, i, seq_len);
      if (r.write_encoder_kv) {
        for (int p = 0; p < seq_len; ++p) m.slot_mapping.push_back(slot_of(group, r, i, p));
      }
    } else {
      rows[i] = kernel_row(group, r, i, seq_len);
      for (int p = r.num_computed_tokens; p < seq_len; ++p) {
        m.slot_mapping.push_back(slot_of(group, r, i, p));
      }
    }
    m.seq_lens.push_back(seq_len);
    m.max_seq_len = std::max(m.max_seq_len, seq_len);
    m.max_blocks_per_req = std::max(m.max_blocks_per_req, static_cast<int>(rows[i].size()));
  }
  m.num_actual_tokens = m.query_start_loc.back();
  m.block_table.assign(batch.size() * static_cast<size_t>(m.max_blocks_per_req),
                       BlockPool::kNullBlock);
  for (size_t i = 0; i < batch.size(); ++i) {
    std::copy(rows[i].begin(), rows[i].end(),
              m.block_table.begin() + static_cast<std::ptrdiff_t>(i * m.max_blocks_per_req));
  }
  return m;
}

std::vector<CommonAttentionMetadata> build_step_metadata(const KvCacheManager& kv,
                                                         std::span<const StepRequest> batch) {
  std::vector<CommonAttentionMetadata> out;
  out.reserve(kv.config().groups.size());
  std::vector<ScheduledRequest> requests(batch.size());
  for (const KvCacheGroup& g : kv.config().groups) {
    for (size_t i = 0; i < batch.size(); ++i) {
      const StepRequest& s = batch[i];
      requests[i] = ScheduledRequest{s.num_computed_tokens, s.num_new_tokens,
                                     kv.block_table(s.id, g.group_id), kv.encoder_len(s.id),
                                     s.write_encoder_kv};
    }
    out.push_back(build_common_metadata(g, requests));
  }
  return out;
}

}  // namespace attnkit
