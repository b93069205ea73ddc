#pragma once
// Property of the per-step metadata builder, shared by its fuzzer and the regression
// tests. The input bytes describe an arbitrary group (kind, cache and kernel block sizes)
// and batch (computed/new tokens, encoder lengths, block tables with any ids, including
// ones no pool handed out). build_common_metadata() must throw attnkit::Error, or return
// metadata whose documented layout holds: offsets, lengths, the padded table, one real
// slot per new decoder token, every slot inside a block of the batch's tables; for a
// state (mamba) group, the request's one state block as its row and no per-token slot.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "attnkit/core/error.h"
#include "attnkit/kv_cache/common_metadata_builder.h"
#include "properties/property_violation.h"

namespace attnkit::fuzz {

// Reads bytes from the fuzz input; 0 once it is exhausted.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }
  int u16() { return u8() | (u8() << 8); }
  bool done() const { return pos_ >= size_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

inline void check_metadata(const uint8_t* data, size_t size) {
  ByteReader in(data, size);
  KvCacheGroup group;
  const auto kinds = all_values<KvCacheKind>();
  group.spec.kind = kinds[in.u8() % kinds.size()];
  const int cache_block = 1 << (in.u8() % 7);  // 1 .. 64
  const int split = 1 << (in.u8() % 3);        // 1, 2, 4 kernel blocks per block
  group.spec.block_size = cache_block;
  group.kernel_block_size = std::max(1, cache_block / split);
  group.spec.num_kv_heads = 1;
  group.spec.head_size = 8;
  group.spec.head_size_v = group.spec.kind == KvCacheKind::kMlaAttention ? 0 : 8;
  group.spec.sliding_window = group.spec.kind == KvCacheKind::kSlidingWindow ? 1 + in.u8() : 0;
  if (group.spec.is_state() && (in.u8() & 1) != 0) {
    // Half the state groups carry dimensions; the other half must be refused.
    StateLayerDims dims;
    dims.type = StateLayerType::kMamba2;
    dims.num_heads = 1 + in.u8() % 4;
    dims.head_dim = 8;
    dims.n_groups = 1;
    dims.state_size = 16;
    dims.conv_kernel = 4;
    group.spec.state = dims;
  }
  group.layer_indices = {0};

  const int num_reqs = in.u8() % 9;
  std::vector<std::vector<int32_t>> tables(static_cast<size_t>(num_reqs));
  std::vector<ScheduledRequest> batch(static_cast<size_t>(num_reqs));
  for (int i = 0; i < num_reqs; ++i) {
    auto& r = batch[static_cast<size_t>(i)];
    r.num_computed_tokens = in.u16() % 600 - 8;  // a few negative values on purpose
    r.num_new_tokens = in.u16() % 300 - 4;
    r.encoder_len = in.u8() % 200;
    r.write_encoder_kv = (in.u8() & 1) != 0;
    auto& table = tables[static_cast<size_t>(i)];
    const int len = in.u8() % 40;
    for (int b = 0; b < len; ++b) table.push_back(static_cast<int32_t>(in.u16()) - 2);
    r.block_table = table;
  }
  CommonAttentionMetadata m;
  try {
    m = build_common_metadata(group, batch);
  } catch (const Error&) {
    return;
  }
  const auto reqs = static_cast<size_t>(num_reqs);
  ATTNKIT_PROPERTY(m.num_reqs == num_reqs);
  ATTNKIT_PROPERTY(m.query_start_loc.size() == reqs + 1 && m.query_start_loc[0] == 0);
  for (size_t i = 0; i < reqs; ++i) {
    ATTNKIT_PROPERTY(m.query_start_loc[i + 1] >= m.query_start_loc[i]);
    ATTNKIT_PROPERTY(m.seq_lens[i] >= 0);
  }
  ATTNKIT_PROPERTY(m.query_start_loc[reqs] == m.num_actual_tokens);
  ATTNKIT_PROPERTY(m.block_table.size() == reqs * static_cast<size_t>(m.max_blocks_per_req));
  if (group.spec.is_state()) {
    // A state group is accepted only with dimensions; each request's row is its one state
    // block, and no token writes a slot (the state is updated in place).
    ATTNKIT_PROPERTY(group.spec.state.has_value());
    ATTNKIT_PROPERTY(m.max_blocks_per_req == (num_reqs > 0 ? 1 : 0));
    for (size_t i = 0; i < reqs; ++i) {
      ATTNKIT_PROPERTY(m.block_table[i] == batch[i].block_table[0]);
      ATTNKIT_PROPERTY(m.block_table[i] > m.null_block_id);
    }
    ATTNKIT_PROPERTY(m.slot_mapping.size() == static_cast<size_t>(m.num_actual_tokens));
    for (int64_t slot : m.slot_mapping) ATTNKIT_PROPERTY(slot == -1);
    return;
  }
  const bool decoder_kind = group.spec.kind != KvCacheKind::kEncoderOnlyAttention &&
                            group.spec.kind != KvCacheKind::kCrossAttention;
  if (decoder_kind) {
    // Every new token of a decoder group gets a real slot: a negative slot would silently
    // skip its K/V write.
    ATTNKIT_PROPERTY(m.slot_mapping.size() == static_cast<size_t>(m.num_actual_tokens));
    for (int64_t slot : m.slot_mapping) ATTNKIT_PROPERTY(slot >= 0);
  }
  if (group.spec.has_cache() && m.block_size > 0) {
    // Every written slot must fall in a (kernel) block listed for some request.
    for (int64_t slot : m.slot_mapping) {
      if (slot < 0) continue;
      const auto block = static_cast<int32_t>(slot / m.block_size);
      ATTNKIT_PROPERTY(block != m.null_block_id);
      ATTNKIT_PROPERTY(std::find(m.block_table.begin(), m.block_table.end(), block) !=
                       m.block_table.end());
    }
  }
}

}  // namespace attnkit::fuzz
