#pragma once
// The core vocabulary: compute dtypes, KV-cache dtypes, attention types, KV-cache kinds
// (vLLM's spellings), KV layouts and platforms. Every enum prints with to_string() and
// parses case-insensitively with parse<Enum>(text); an unknown string throws Error
// naming it and listing the valid spellings.

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "attnkit/core/error.h"
#include "attnkit/export.h"

namespace attnkit {

// Dtype of queries, fresh keys/values and outputs.
enum class DType { kFloat32, kFloat16, kBFloat16 };

// Dtype the paged KV cache stores. kAuto = same as the compute dtype: a user-facing
// request that selection resolves once (resolve_kv_cache_dtype), so the configurations
// below the selector carry a concrete dtype. fp8 values carry a per-tensor scale:
// stored = quantize(x / scale), read = dequantize(stored) * scale.
enum class KvCacheDType { kAuto, kFloat16, kBFloat16, kFloat32, kFp8E4M3, kFp8E5M2 };

enum class AttentionType {
  kDecoder,         // causal self-attention over the paged cache
  kEncoder,         // bidirectional self-attention of an encoder-decoder model's encoder
  kEncoderOnly,     // bidirectional self-attention of an encoder-only model, no cache
  kEncoderDecoder,  // cross attention: decoder queries over the encoder's cached K/V
};

// KV-cache group kinds, spelled as vLLM's KVCacheSpecKind.
enum class KvCacheKind {
  kFullAttention,
  kSlidingWindow,
  kMlaAttention,
  kSlidingWindowMla,
  kChunkedLocalAttention,
  kSinkFullAttention,
  kEncoderOnlyAttention,
  kCrossAttention,
  // Recurrent-state layers of hybrid models (Mamba, gated delta net, short convolution,
  // linear attention): a fixed-size state per request instead of per-token K/V.
  kMamba,
};

// The recurrent-state layer types attnkit knows (core/state_spec.h gives their state).
enum class StateLayerType {
  kMamba1,              // selective scan (Jamba, Falcon-Mamba)
  kMamba2,              // SSD (Bamba, Nemotron-H, Falcon-H1, Granite-4 hybrids)
  kGatedDeltaNet,       // gated delta rule (Qwen3-Next)
  kKimiDeltaAttention,  // delta rule with a per-channel gate (Kimi-Linear)
  kShortConv,           // gated short convolution (LFM2)
  kLinearAttention,     // decayed linear attention (MiniMax lightning attention)
  kRgLru,               // real-gated linear recurrent unit (RecurrentGemma)
};

// NHD: a block is [block_size, num_kv_heads, head_size]; HND: [num_kv_heads, block_size,
// head_size]. In both, head_size is the contiguous (stride-1) dimension.
enum class KvLayout { kNHD, kHND };

enum class PlatformKind { kCpu, kCuda };

// Element types a tensor view can hold.
enum class ScalarType { kFloat32, kFloat16, kBFloat16, kFp8E4M3, kFp8E5M2, kInt32, kInt64, kUInt8 };

ATTNKIT_API std::string_view to_string(DType v);
ATTNKIT_API std::string_view to_string(KvCacheDType v);
ATTNKIT_API std::string_view to_string(AttentionType v);
ATTNKIT_API std::string_view to_string(KvCacheKind v);
ATTNKIT_API std::string_view to_string(StateLayerType v);
ATTNKIT_API std::string_view to_string(KvLayout v);
ATTNKIT_API std::string_view to_string(PlatformKind v);
ATTNKIT_API std::string_view to_string(ScalarType v);

// parse<DType>("bf16") etc. Accepted spellings include aliases (e.g. "bf16", "bfloat16";
// "fp8" = "fp8_e4m3"); unknown text throws Error(kNotFound) listing the valid ones.
template <typename E>
E parse(std::string_view text);

// All values of an enum, in declaration order.
template <typename E>
std::span<const E> all_values();

// The canonical spellings of every value, sorted alphabetically, joined by ", ".
template <typename E>
std::string valid_spellings();

// The one place KvCacheDType::kAuto is given a meaning: the KV-cache dtype that stores
// `compute` unchanged (float32 -> float32, float16 -> float16, bfloat16 -> bfloat16); a
// concrete `kv` comes back as it is. Selection calls it where it builds a layer's
// SelectorConfig and AttentionLayerParams (selector/layer_config.h); everything else that
// meets a kAuto (a hand-built configuration) reads it through this function.
ATTNKIT_API KvCacheDType resolve_kv_cache_dtype(KvCacheDType kv, DType compute);

ATTNKIT_API size_t size_of(ScalarType t);
ATTNKIT_API ScalarType scalar_type_of(DType d);
// The storage type of a KV cache: of resolve_kv_cache_dtype(kv, compute).
ATTNKIT_API ScalarType scalar_type_of(KvCacheDType kv, DType compute);
// Bytes per element of a KV cache dtype (of resolve_kv_cache_dtype(kv, compute)).
ATTNKIT_API size_t kv_cache_dtype_bytes(KvCacheDType kv, DType compute);
ATTNKIT_API bool is_fp8(KvCacheDType kv);

}  // namespace attnkit
