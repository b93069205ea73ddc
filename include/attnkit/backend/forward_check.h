#pragma once
// The checks every backend's forward() runs before its kernels, shared so that every
// backend rejects the same bad input with the same message (docs/reliability.md).
//
// Two levels:
//   - structural checks, always on: the layer's shapes, every tensor's device, dtype,
//     shape and strides against the layer; the common metadata's array sizes, offsets and
//     lengths; the block ids each request reads and every slot written lie inside the
//     cache; sequence lengths fit the block table. They cost O(requests + blocks read +
//     slots written), nothing next to the attention itself, and they are what keeps a bad
//     index from reading or writing outside the cache.
//   - checked mode, on by default in debug builds and off in release builds: also
//     verifies that the slot mapping agrees with the block table (row t of request i at
//     position p writes block_table[i][p / block_size] * block_size + p % block_size),
//     that no two rows write the same slot, and after the kernels that the query, fresh
//     K/V and output rows of host tensors are finite; NaN/inf is reported with its
//     request (NonFiniteOutputError), whose rows are the only ones it can reach. The
//     environment variable ATTNKIT_CHECKED=1/0 (also on/off) overrides the build's
//     default for the process; AttentionLayerParams::checked (RunnerOptions::checked,
//     `attnkit run --checked`) overrides both for one layer.
//
// Every failure throws Error(kInvalidArgument) "<BACKEND>: <what>" naming the bad value
// and the valid range.

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "attnkit/backend/backend.h"
#include "attnkit/backend/metadata.h"
#include "attnkit/core/error.h"
#include "attnkit/core/tensor.h"
#include "attnkit/export.h"

namespace attnkit {

// One forward() call's arguments, as the checks and the parameter helpers see them.
struct ATTNKIT_API ForwardArgs {
  const AttentionLayerParams& layer;
  const TensorView& query;
  const TensorView& key;    // this step's fresh K/V rows, or empty
  const TensorView& value;  // empty for MLA
  const KvCacheTensors& cache;
  const CommonAttentionMetadata& common;
  const TensorView& output;
};

// What the kernels of one backend need beyond the contract.
struct ATTNKIT_API ForwardCheckOptions {
  std::string_view backend;  // message prefix, e.g. "CPU_FLASH"
  DeviceType device = DeviceType::kCpu;
  // Kernels that load `vector_elements` elements at a time need every non-last stride to
  // be a multiple of it and the data 16-byte aligned (1 = no requirement).
  int vector_elements = 1;
  // Check every block-table entry (not only those the requests' lengths use): for kernels
  // that read the ids of a whole tile ahead of the length mask.
  bool whole_block_table = false;
};

// The process default of checked mode: ATTNKIT_CHECKED when set (1/0/on/off/true/false,
// else Error naming the value), otherwise on in debug builds (NDEBUG undefined).
ATTNKIT_API bool checked_mode_default();
// Whether forward() runs `layer` checked: layer.checked, else checked_mode_default().
ATTNKIT_API bool checked_mode(const AttentionLayerParams& layer);

// Layer parameters every kernel relies on: positive head counts and sizes, num_heads a
// multiple of num_kv_heads (GQA), non-negative window/chunk/soft-cap, one sink per head,
// MLA with one KV head and head_size_v <= head_size.
ATTNKIT_API void check_layer_params(const AttentionLayerParams& layer, std::string_view backend);

// The common metadata's own consistency, as every builder needs it: array sizes
// (query_start_loc [B+1], seq_lens [B]), query_start_loc starting at 0, non-decreasing and
// ending at num_actual_tokens, non-negative lengths. For a layer that reads the paged cache
// (uses_paged_cache) also: max_blocks_per_req non-negative, a block table of at least
// B * max_blocks_per_req entries (row i starts at i * max_blocks_per_req; entries past the
// last row are never read), a positive block size when there is a block table or a
// request with tokens, and every request's seq_len fitting its max_blocks_per_req blocks.
// Encoder and encoder-only self-attention have no cache: their block-table fields are not
// read, so not checked.
ATTNKIT_API void check_common_metadata(const CommonAttentionMetadata& common,
                                       const AttentionLayerParams& layer, std::string_view backend);

// Encoder and encoder-only self-attention read this step's fresh K/V (contiguous mode);
// every other attention type reads the paged cache.
ATTNKIT_API bool uses_paged_cache(const AttentionLayerParams& layer);
// Whether forward() writes fresh K/V into the cache (paged layer, key given).
ATTNKIT_API bool writes_cache(const ForwardArgs& args);

// All structural checks (always), then the checked-mode metadata checks when
// checked_mode(args.layer). Call before anything is written.
ATTNKIT_API void check_forward(const ForwardArgs& args, const ForwardCheckOptions& options);

// Rows holding NaN/inf of one tensor, per request (rows of request i are query_start_loc[i]
// .. query_start_loc[i+1]-1).
struct ATTNKIT_API NonFiniteRows {
  int request = 0;                // index in the batch
  const char* tensor = "output";  // "query", "key", "value" or "output"
  int first_row = 0, num_rows = 0;
  int head = 0, dim = 0;  // of the first non-finite element
};
// `tensor` is a host [rows, heads, dim] (or [rows, dim]) view of fp32, fp16 or bf16.
ATTNKIT_API std::vector<NonFiniteRows> find_non_finite_rows(const TensorView& tensor,
                                                            const CommonAttentionMetadata& common,
                                                            const char* name = "output");
// Checked mode's scan of one forward call (host tensors): the query, the fresh K/V rows
// that are the step's tokens, and the output; sorted by request.
ATTNKIT_API std::vector<NonFiniteRows> find_non_finite(const ForwardArgs& args);
// Distinct requests in `rows` (sorted by request).
ATTNKIT_API int count_requests(const std::vector<NonFiniteRows>& rows);
// "request 1 query: 1 rows (first: row 2 head 0 dim 5); request 1 output: ..." (batch
// indices).
ATTNKIT_API std::string describe_non_finite(const std::vector<NonFiniteRows>& rows);

// Thrown by checked mode when output rows are not finite; rows() says which requests (batch
// indices), so that a runtime can name them by id.
class ATTNKIT_API NonFiniteOutputError : public Error {
 public:
  NonFiniteOutputError(const std::string& message, std::vector<NonFiniteRows> rows)
      : Error(ErrorCode::kInvalidArgument, message), rows_(std::move(rows)) {}
  const std::vector<NonFiniteRows>& rows() const { return rows_; }

 private:
  std::vector<NonFiniteRows> rows_;
};

// Checked mode, after the kernels: throws NonFiniteOutputError naming every request whose
// query, fresh K/V or output rows hold NaN/inf (find_non_finite). The inputs are scanned
// too because a kernel may drop a NaN score rather than propagate it; either way the
// other requests' outputs are complete and unaffected. No-op when checked mode is off;
// tensors not in host memory are not scanned (the runtime scans what it fetches).
ATTNKIT_API void check_forward_outputs(const ForwardArgs& args, const ForwardCheckOptions& options);

}  // namespace attnkit
