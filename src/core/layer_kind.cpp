#include "attnkit/core/layer_kind.h"

namespace attnkit {

KvCacheKind layer_kind(const LayerKindFacts& f) {
  switch (f.attn_type) {
    case AttentionType::kEncoder:
    case AttentionType::kEncoderOnly:
      return KvCacheKind::kEncoderOnlyAttention;
    case AttentionType::kEncoderDecoder:
      return KvCacheKind::kCrossAttention;
    case AttentionType::kDecoder:
      break;
  }
  if (f.use_mla) {
    return f.sliding_window ? KvCacheKind::kSlidingWindowMla : KvCacheKind::kMlaAttention;
  }
  if (f.sliding_window) return KvCacheKind::kSlidingWindow;
  if (f.chunked) return KvCacheKind::kChunkedLocalAttention;
  if (f.sink_tokens) return KvCacheKind::kSinkFullAttention;
  return KvCacheKind::kFullAttention;
}

}  // namespace attnkit
