#include "backends/cpu_flash/cpu_flash_metadata.h"

#include <omp.h>

#include <span>
#include <string>

#include "attnkit/core/error.h"

namespace attnkit::cpu {
namespace {

[[noreturn]] void bad(const std::string& what) {
  throw Error(ErrorCode::kInvalidArgument, "CPU_FLASH metadata: " + what);
}

}  // namespace

bool uses_contiguous_kv(AttentionType type) {
  return type == AttentionType::kEncoderOnly || type == AttentionType::kEncoder;
}

CpuFlashBuilder::CpuFlashBuilder(const KvCacheSpec& spec, const AttentionLayerParams& layer)
    : spec_(spec), layer_(layer) {}

const AttentionMetadata& CpuFlashBuilder::build(const CommonAttentionMetadata& c,
                                                const ExecutionContext& /*ctx*/) {
  const int B = c.num_reqs;
  if (B < 0) bad("num_reqs " + std::to_string(B) + " is negative");
  if (c.query_start_loc.size() != static_cast<size_t>(B) + 1) {
    bad("query_start_loc has " + std::to_string(c.query_start_loc.size()) +
        " entries, expected num_reqs + 1 = " + std::to_string(B + 1));
  }
  if (c.seq_lens.size() != static_cast<size_t>(B)) {
    bad("seq_lens has " + std::to_string(c.seq_lens.size()) +
        " entries, expected num_reqs = " + std::to_string(B));
  }
  if (c.query_start_loc[0] != 0) bad("query_start_loc[0] must be 0");
  const bool contiguous = uses_contiguous_kv(layer_.attn_type);
  for (int i = 0; i < B; ++i) {
    const int q_len =
        c.query_start_loc[static_cast<size_t>(i) + 1] - c.query_start_loc[static_cast<size_t>(i)];
    const int kv_len = c.seq_lens[static_cast<size_t>(i)];
    if (q_len < 0) bad("query_start_loc decreases at request " + std::to_string(i));
    if (kv_len < 0)
      bad("seq_lens[" + std::to_string(i) + "] = " + std::to_string(kv_len) + " is negative");
    if (contiguous && kv_len != q_len) {
      bad("encoder self-attention request " + std::to_string(i) + " has seq_len " +
          std::to_string(kv_len) + " but " + std::to_string(q_len) + " query tokens (must match)");
    }
    if (!contiguous) {
      const int64_t blocks =
          c.block_size > 0 ? (int64_t{kv_len} + c.block_size - 1) / c.block_size : 0;
      if (kv_len > 0 && c.block_size <= 0)
        bad("block_size " + std::to_string(c.block_size) + " must be positive");
      if (blocks > c.max_blocks_per_req) {
        bad("request " + std::to_string(i) + " needs " + std::to_string(blocks) +
            " blocks but max_blocks_per_req is " + std::to_string(c.max_blocks_per_req));
      }
    }
  }
  if (c.num_actual_tokens != c.query_start_loc.back()) {
    bad("num_actual_tokens " + std::to_string(c.num_actual_tokens) +
        " differs from query_start_loc[num_reqs] = " + std::to_string(c.query_start_loc.back()));
  }
  if (!contiguous &&
      c.block_table.size() < static_cast<size_t>(B) * static_cast<size_t>(c.max_blocks_per_req)) {
    bad("block_table has " + std::to_string(c.block_table.size()) +
        " entries, expected num_reqs x max_blocks_per_req = " +
        std::to_string(int64_t{B} * c.max_blocks_per_req));
  }
  // slot_mapping has one entry per fresh K/V row: the step's tokens for decoder and
  // encoder-only layers, the encoder tokens being cached for cross attention (checked
  // against the key tensor in forward()).
  const bool cross = layer_.attn_type == AttentionType::kEncoderDecoder;
  if (!cross && !c.slot_mapping.empty() &&
      c.slot_mapping.size() != static_cast<size_t>(c.num_actual_tokens)) {
    bad("slot_mapping has " + std::to_string(c.slot_mapping.size()) + " entries, expected " +
        std::to_string(c.num_actual_tokens));
  }

  MaskRule mask;
  mask.causal = layer_.is_causal() && c.causal;
  mask.sliding_window = layer_.sliding_window;
  mask.chunk_size = layer_.chunk_size;
  FlashPlanOptions options;
  options.num_threads = omp_get_max_threads();
  metadata_.common_ = &c;
  metadata_.plan_ = make_flash_plan(
      std::span<const int32_t>(c.query_start_loc), std::span<const int32_t>(c.seq_lens),
      layer_.num_heads, layer_.num_kv_heads, layer_.head_size, layer_.head_size_v, mask, options);
  metadata_.workspace_.ensure(metadata_.plan_);
  return metadata_;
}

}  // namespace attnkit::cpu
