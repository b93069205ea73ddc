#pragma once
// A per-phase composite: one backend for the prefill rows of a step and another for its
// decode rows, over one KV cache (vLLM RFC #48029's prefill_backend / decode_backend,
// SGLang's --prefill-attention-backend / --decode-attention-backend).
//
// It is an AttentionBackend like any other, so the KV-cache planner, the runtime and the
// explain report need nothing special:
//   - capabilities: the intersection of the two (dtypes, KV dtypes, head sizes, kernel
//     block sizes, feature flags, compute-capability range, the lower CUDA-graph support);
//     decoder self-attention only;
//   - validate(): the reasons of the intersection plus pairing_reasons() (the two must
//     agree on the platform, the KV layout and a kernel block size);
//   - its metadata builder splits each step's batch into its decode requests and its
//     prefill requests and gives each part, re-based (query_start_loc from 0, block-table
//     rows, slot mapping and seq_lens of those requests only), to that phase's own builder;
//   - its implementation runs each phase's rows through that phase's implementation, on
//     row slices of the caller's q/k/v/out (no copies), into the one shared KV cache.
//
// The batch must be split-ordered, as vLLM's reorder_batch_to_split_decodes_and_prefills
// leaves it: every decode request (query length <= kDecodeQueryLen) before every prefill
// request. A batch in another order is refused by build(), naming the first request out
// of place (the model runner orders its batches so; an AttentionStack caller does it).

#include <memory>
#include <string>
#include <vector>

#include "attnkit/backend/backend.h"
#include "attnkit/export.h"

namespace attnkit {

// How a step's batch splits: requests [0, num_decode_reqs) are decodes, their rows are
// [0, num_decode_tokens); the rest are prefills.
struct ATTNKIT_API PhaseSplit {
  int num_decode_reqs = 0;
  int num_decode_tokens = 0;
  int num_prefill_reqs = 0;
  int num_prefill_tokens = 0;
};

// The split of a split-ordered batch. Throws Error(kInvalidArgument) naming the first
// decode request that follows a prefill request.
ATTNKIT_API PhaseSplit split_phases(const CommonAttentionMetadata& common);

// The metadata of requests [first_req, first_req + num_reqs) of `common` (a decoder batch)
// as a batch of their own: query_start_loc re-based to 0, their seq_lens, block-table rows
// and slot mapping, max_query_len and max_seq_len recomputed. `out` keeps its capacity.
ATTNKIT_API void slice_requests(const CommonAttentionMetadata& common, int first_req, int num_reqs,
                                CommonAttentionMetadata& out);

// The intersection of two size rules (an exact list filtered by the other rule, or a rule
// of the least common multiple within both ranges).
ATTNKIT_API SizeRule intersect(const SizeRule& a, const SizeRule& b);

// Why `prefill` and `decode` cannot share one KV cache as a composite for `config`
// (whatever each can serve alone): different platforms, different required KV layouts, no
// kernel block size both take (or a user block size one of them cannot serve), a layer
// that is not decoder self-attention. Empty = they can.
ATTNKIT_API std::vector<std::string> pairing_reasons(const AttentionBackend& prefill,
                                                     const AttentionBackend& decode,
                                                     const SelectorConfig& config);

// "prefill:A|decode:B", the composite's name in reports.
ATTNKIT_API std::string composite_name(std::string_view prefill, std::string_view decode);

// The composite of two backends (both non-null; they may be the same backend).
ATTNKIT_API std::shared_ptr<const AttentionBackend> make_composite_backend(
    std::shared_ptr<const AttentionBackend> prefill,
    std::shared_ptr<const AttentionBackend> decode);

}  // namespace attnkit
