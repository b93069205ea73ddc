#pragma once
// A DeepSeek-style MLA decode step for the MLA benchmarks (bench/mla_cpu_bench.cpp,
// bench/mla_cuda_bench.cpp): the layer (576-wide latent rows of which 512 are the values,
// one KV head), its cache spec, and the plans of one-token decode steps over disjoint sets
// of cache blocks (each set's block table shuffled), so that successive calls read cache
// bytes the last-level cache does not hold.

#include <cstdint>
#include <memory>
#include <random>
#include <string_view>
#include <vector>

#include "attnkit/backend/backend.h"
#include "attnkit/core/enums.h"
#include "attnkit/export.h"

namespace attnkit::bench {

struct ATTNKIT_API MlaDecodeShape {
  int heads = 128;
  int batch = 64;      // requests, one query token each
  int context = 4096;  // keys per request (the new token included)
  int block_size = 64;
  KvCacheDType kv_cache_dtype = KvCacheDType::kAuto;  // the compute dtype (bf16) or fp8_e4m3

  int blocks_per_request() const { return (context + block_size - 1) / block_size; }
};

// The layer (bf16 queries, scale 1/sqrt(192); fp8 caches with k/v scale 0.5) and its spec.
ATTNKIT_API AttentionLayerParams mla_decode_layer(const MlaDecodeShape& shape);
ATTNKIT_API KvCacheSpec mla_decode_cache_spec(const MlaDecodeShape& shape);

// `backend`'s implementation and one built plan per block set: set s uses blocks
// [s * batch * blocks_per_request(), +batch * blocks_per_request()).
struct ATTNKIT_API MlaDecodePlans {
  std::unique_ptr<AttentionImpl> impl;
  std::vector<std::unique_ptr<CommonAttentionMetadata>> commons;  // what each plan was built from
  std::vector<std::unique_ptr<MetadataBuilder>> builders;
  std::vector<const AttentionMetadata*> plans;  // one per set
};
ATTNKIT_API MlaDecodePlans plan_mla_decode(const AttentionBackend& backend,
                                           const MlaDecodeShape& shape, int sets,
                                           std::mt19937& rng);

}  // namespace attnkit::bench
