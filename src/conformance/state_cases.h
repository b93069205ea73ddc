#pragma once
// Conformance cases of state backends (recurrent-state layers, kind mamba). A case is a
// layer type and sizes, a compute dtype and a batch of requests with their sequence
// lengths (seq_lens) and a prefill-chunk pattern (query_lens, used cyclically). run: the
// batch goes through the backend three times from fresh state blocks filled with NaN —
// each sequence in one prefill, in chunks of the pattern, and token by token — with the
// metadata built directly (one random physical block per request). It passes when:
//   - every output matches the layer's dense form (no state, double; backend/state_ops.h)
//     within the dtype's output tolerance (relative L2),
//   - the three runs agree within the same tolerance (output_error reports the dense
//     comparison, cache_error the largest disagreement between runs),
//   - no byte of a block no request owns changed.

#include <vector>

#include "attnkit/conformance/conformance.h"

namespace attnkit::conformance {

std::vector<ConformanceCase> generate_state_cases(const AttentionBackend& backend, Budget budget,
                                                  uint64_t seed);

CaseResult run_state_case(const AttentionBackend& backend, const ConformanceCase& test_case,
                          const Platform& platform, DeviceMemory& memory);

}  // namespace attnkit::conformance
