#pragma once
// The host-side inputs of one conformance case, built from its seed (see conformance.h
// for what they hold). Internal to src/conformance.

#include "attnkit/backend/backend.h"
#include "attnkit/conformance/conformance.h"
#include "attnkit/core/tensor.h"

namespace attnkit::conformance {

struct CaseInputs {
  // query [T, num_heads, head_size], values in [-3, 3] (scores of order 1).
  HostTensor query;
  // This step's K/V, [T, num_kv_heads, head_size] / [T, num_kv_heads, head_size_v]; both
  // empty for cross attention (the encoder's K/V are already cached), value empty for MLA
  // (key is the latent vector [T, 1, latent]).
  HostTensor key, value;
  // The paged cache in the case's layout (NHD [blocks, block_size, kv_heads, dim] or HND
  // [blocks, kv_heads, block_size, dim]); empty for encoder / encoder-only attention;
  // value cache empty for MLA.
  HostTensor key_cache, value_cache;
  CommonAttentionMetadata common;
  KvCacheSpec spec;
  bool has_cache = false;
};

CaseInputs build_case_inputs(const ConformanceCase& test_case);

// A view of `tensor` whose data lives at `data` on `device` (same shape and strides).
TensorView view_at(const HostTensor& tensor, void* data, Device device);

}  // namespace attnkit::conformance
