#include "attnkit/backend/step_limits.h"

#include <fmt/format.h>

#include <string>

#include "attnkit/core/error.h"

namespace attnkit {

void check_step_limits(const StepLimits& limits, std::string_view backend) {
  const std::pair<const char*, int> fields[] = {
      {"max_num_reqs", limits.max_num_reqs},
      {"max_num_tokens", limits.max_num_tokens},
      {"max_blocks_per_req", limits.max_blocks_per_req},
      {"max_seq_len", limits.max_seq_len},
  };
  for (const auto& [name, value] : fields) {
    if (value <= 0) {
      throw Error(ErrorCode::kInvalidArgument,
                  fmt::format("{}: StepLimits::{} is {} (must be positive)", backend, name, value));
    }
  }
}

void check_within_limits(const CommonAttentionMetadata& common, const StepLimits& limits,
                         std::string_view backend) {
  const auto beyond = [&](const std::string& what, int64_t value, const char* bound, int limit) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: the step's {} is {}, beyond the reserved StepLimits::{} = {}",
                            backend, what, value, bound, limit));
  };
  if (common.num_reqs > limits.max_num_reqs) {
    beyond("num_reqs", common.num_reqs, "max_num_reqs", limits.max_num_reqs);
  }
  if (common.num_actual_tokens > limits.max_num_tokens) {
    beyond("num_actual_tokens", common.num_actual_tokens, "max_num_tokens", limits.max_num_tokens);
  }
  if (common.max_blocks_per_req > limits.max_blocks_per_req) {
    beyond("max_blocks_per_req", common.max_blocks_per_req, "max_blocks_per_req",
           limits.max_blocks_per_req);
  }
  for (size_t i = 0; i < common.seq_lens.size(); ++i) {
    if (common.seq_lens[i] > limits.max_seq_len) {
      beyond(fmt::format("seq_lens[{}]", i), common.seq_lens[i], "max_seq_len", limits.max_seq_len);
    }
  }
}

void require_reserved_for_graphs(const StepLimits& limits, std::string_view backend) {
  if (limits.max_num_reqs <= 0) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("{}: a graph-shaped build (ExecutionContext::graph_shape) needs "
                            "reserve() first: the plan is sized for StepLimits::max_seq_len and "
                            "a captured graph needs buffers that never move",
                            backend));
  }
}

}  // namespace attnkit
