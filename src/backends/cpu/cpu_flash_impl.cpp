#include "backends/cpu/cpu_flash_impl.h"

#include <string>

#include "attnkit/core/error.h"
#include "backends/cpu/cpu_flash_metadata.h"
#include "backends/cpu/flash_attention.h"

namespace attnkit::cpu {
namespace {

[[noreturn]] void bad(const std::string& what) {
  throw Error(ErrorCode::kInvalidArgument, "CPU_FLASH forward: " + what);
}

// Checks `t` is a CPU tensor of `dtype` with shape [n0, n1, n2] and a stride-1 last dim.
void check_rows(const TensorView& t, const char* name, ScalarType dtype, int64_t n0, int64_t n1,
                int64_t n2) {
  if (t.device.type != DeviceType::kCpu) bad(std::string(name) + " must be on the CPU");
  if (t.dtype != dtype) {
    bad(std::string(name) + " has dtype " + std::string(to_string(t.dtype)) + ", expected " +
        std::string(to_string(dtype)));
  }
  if (t.ndim != 3 || t.shape[0] != n0 || t.shape[1] != n1 || t.shape[2] != n2) {
    bad(std::string(name) + " is " + t.describe() + ", expected shape [" + std::to_string(n0) +
        ", " + std::to_string(n1) + ", " + std::to_string(n2) + "]");
  }
  if (t.strides[2] != 1) bad(std::string(name) + " must have a stride-1 last dimension");
}

struct CacheView {
  int64_t block = 0, token = 0, head = 0;
};

// Strides of a 4-D cache tensor in the layout's order; checks its shape.
CacheView check_cache(const TensorView& t, const char* name, const KvCacheTensors& cache,
                      ScalarType dtype, int num_kv_heads, int width) {
  if (t.device.type != DeviceType::kCpu) bad(std::string(name) + " cache must be on the CPU");
  if (t.dtype != dtype) {
    bad(std::string(name) + " cache has dtype " + std::string(to_string(t.dtype)) + ", expected " +
        std::string(to_string(dtype)));
  }
  const bool hnd = cache.layout == KvLayout::kHND;
  const int64_t want1 = hnd ? num_kv_heads : cache.block_size;
  const int64_t want2 = hnd ? cache.block_size : num_kv_heads;
  if (t.ndim != 4 || t.shape[1] != want1 || t.shape[2] != want2 || t.shape[3] != width ||
      t.strides[3] != 1) {
    bad(std::string(name) + " cache is " + t.describe() + ", expected [num_blocks, " +
        std::to_string(want1) + ", " + std::to_string(want2) + ", " + std::to_string(width) +
        "] (" + std::string(to_string(cache.layout)) + ") with a stride-1 last dimension");
  }
  return hnd ? CacheView{t.strides[0], t.strides[2], t.strides[1]}
             : CacheView{t.strides[0], t.strides[1], t.strides[2]};
}

}  // namespace

CpuFlashImpl::CpuFlashImpl(const AttentionLayerParams& layer)
    : layer_(layer),
      dtype_(scalar_type_of(layer.dtype)),
      kv_dtype_(scalar_type_of(layer.kv_cache_dtype, layer.dtype)) {
  auto unsupported = [](const std::string& why) {
    throw Error(ErrorCode::kUnsupported, "CPU_FLASH cannot run this layer: " + why);
  };
  if (layer.num_kv_heads <= 0 || layer.num_heads <= 0 ||
      layer.num_heads % layer.num_kv_heads != 0) {
    unsupported("num_heads " + std::to_string(layer.num_heads) +
                " must be a positive multiple of num_kv_heads " +
                std::to_string(layer.num_kv_heads));
  }
  for (int size : {layer.head_size, layer.head_size_v}) {
    if (size <= 0 || size % kHeadSizeMultiple != 0 || size > 576) {
      unsupported("head size " + std::to_string(size) +
                  " not supported (supported: multiples of 16 up to 576)");
    }
  }
  if (layer.use_mla && (layer.num_kv_heads != 1 || layer.head_size_v > layer.head_size)) {
    unsupported("MLA needs num_kv_heads 1 and head_size_v <= head_size");
  }
  if (!layer.sinks.empty() && layer.sinks.size() != static_cast<size_t>(layer.num_heads)) {
    unsupported("sinks has " + std::to_string(layer.sinks.size()) +
                " entries, expected num_heads " + std::to_string(layer.num_heads));
  }
}

void CpuFlashImpl::forward(const TensorView& query, const TensorView& key, const TensorView& value,
                           const KvCacheTensors& cache, const AttentionMetadata& metadata,
                           const TensorView& output) {
  const auto* plan = dynamic_cast<const CpuFlashMetadata*>(&metadata);
  if (plan == nullptr) bad("metadata was not built by a CPU_FLASH builder");
  const CommonAttentionMetadata& c = plan->common();
  const int T = c.num_actual_tokens;
  const int H = layer_.num_heads, KV = layer_.num_kv_heads;
  const int d = layer_.head_size, dv = layer_.head_size_v;
  check_rows(query, "query", dtype_, T, H, d);
  check_rows(output, "output", dtype_, T, H, dv);
  const bool contiguous = uses_contiguous_kv(layer_.attn_type);
  const bool mla = layer_.use_mla;
  const bool fresh_kv = !key.empty();
  // Fresh K/V rows: this step's tokens, except for cross attention, where they are the
  // encoder tokens being cached (one slot_mapping entry each).
  const bool cross = layer_.attn_type == AttentionType::kEncoderDecoder;
  const int64_t kv_rows = cross ? key.shape[0] : T;
  if (fresh_kv) {
    check_rows(key, "key", dtype_, kv_rows, KV, d);
    if (!mla) {
      if (value.empty()) bad("value is empty but key is not");
      check_rows(value, "value", dtype_, kv_rows, KV, dv);
    }
  } else if (contiguous) {
    bad("encoder self-attention needs this step's key and value");
  }

  PagedAttentionParams p;
  p.q = query.data;
  p.out = output.data;
  p.q_dtype = dtype_;
  p.q_token_stride = query.strides[0];
  p.q_head_stride = query.strides[1];
  p.o_token_stride = output.strides[0];
  p.o_head_stride = output.strides[1];
  p.num_seqs = c.num_reqs;
  p.query_start_loc = c.query_start_loc.data();
  p.seq_lens = c.seq_lens.data();
  p.num_heads = H;
  p.num_kv_heads = KV;
  p.head_size = d;
  p.head_size_v = dv;
  p.scale = layer_.scale;
  p.causal = layer_.is_causal() && c.causal;
  p.sliding_window = layer_.sliding_window;
  p.chunk_size = layer_.chunk_size;
  p.soft_cap = layer_.soft_cap;
  p.sinks = layer_.sinks.empty() ? nullptr : layer_.sinks.data();

  if (contiguous) {
    // Encoder self-attention: the keys are this step's fresh rows, no cache.
    p.k_cache = key.data;
    p.v_cache = mla ? key.data : value.data;
    p.kv_dtype = dtype_;
    p.k_token_stride = key.strides[0];
    p.k_head_stride = key.strides[1];
    const TensorView& v = mla ? key : value;
    p.v_token_stride = v.strides[0];
    p.v_head_stride = v.strides[1];
    p.kv_start_loc = c.query_start_loc.data();
  } else {
    if (cache.key.empty()) bad("the layer needs a KV cache but cache.key is empty");
    if (cache.block_size != c.block_size) {
      bad("cache block_size " + std::to_string(cache.block_size) +
          " differs from the metadata's block_size " + std::to_string(c.block_size));
    }
    const CacheView kc = check_cache(cache.key, "key", cache, kv_dtype_, KV, d);
    CacheView vc = kc;
    if (!mla) {
      if (cache.value.empty()) bad("cache.value is empty for a non-MLA layer");
      vc = check_cache(cache.value, "value", cache, kv_dtype_, KV, dv);
    }
    const int64_t num_blocks = cache.key.shape[0];
    // Every block a request reads must exist (a bad id would read out of bounds).
    for (int i = 0; i < c.num_reqs; ++i) {
      const int used = (c.seq_lens[static_cast<size_t>(i)] + c.block_size - 1) / c.block_size;
      for (int b = 0; b < used; ++b) {
        const int32_t id = c.block_table[static_cast<size_t>(i) * c.max_blocks_per_req + b];
        if (id < 0 || id >= num_blocks) {
          bad("block_table[" + std::to_string(i) + "][" + std::to_string(b) +
              "] = " + std::to_string(id) + " is outside the cache's " +
              std::to_string(num_blocks) + " blocks");
        }
      }
    }
    if (fresh_kv) {
      if (c.slot_mapping.size() != static_cast<size_t>(kv_rows)) {
        bad("slot_mapping has " + std::to_string(c.slot_mapping.size()) + " entries for " +
            std::to_string(kv_rows) + " fresh key/value rows");
      }
      for (int64_t t = 0; t < kv_rows; ++t) {
        if (c.slot_mapping[static_cast<size_t>(t)] >= num_blocks * c.block_size) {
          bad("slot_mapping[" + std::to_string(t) +
              "] = " + std::to_string(c.slot_mapping[static_cast<size_t>(t)]) +
              " is outside the cache's " + std::to_string(num_blocks * c.block_size) + " slots");
        }
      }
      CacheUpdateParams u;
      u.key = key.data;
      u.value = mla ? nullptr : value.data;
      u.src_dtype = dtype_;
      u.key_token_stride = key.strides[0];
      u.key_head_stride = key.strides[1];
      if (!mla) {
        u.value_token_stride = value.strides[0];
        u.value_head_stride = value.strides[1];
      }
      u.k_cache = cache.key.data;
      u.v_cache = mla ? nullptr : cache.value.data;
      u.kv_dtype = kv_dtype_;
      u.k_scale = layer_.k_scale;
      u.v_scale = layer_.v_scale;
      u.k_block_stride = kc.block;
      u.k_token_stride = kc.token;
      u.k_head_stride = kc.head;
      u.v_block_stride = vc.block;
      u.v_token_stride = vc.token;
      u.v_head_stride = vc.head;
      u.slot_mapping = c.slot_mapping.data();
      u.num_tokens = static_cast<int>(kv_rows);
      u.num_kv_heads = KV;
      u.head_size = d;
      u.head_size_v = mla ? 0 : dv;
      u.block_size = c.block_size;
      cache_update(u);
    }
    p.k_cache = cache.key.data;
    p.v_cache = mla ? cache.key.data : cache.value.data;
    p.kv_dtype = kv_dtype_;
    p.k_scale = layer_.k_scale;
    // MLA's V is the prefix of the latent, written once with k_scale.
    p.v_scale = mla ? layer_.k_scale : layer_.v_scale;
    p.k_block_stride = kc.block;
    p.k_token_stride = kc.token;
    p.k_head_stride = kc.head;
    p.v_block_stride = vc.block;
    p.v_token_stride = vc.token;
    p.v_head_stride = vc.head;
    p.block_table = c.block_table.data();
    p.block_table_stride = c.max_blocks_per_req;
    p.block_size = c.block_size;
  }
  flash_attention(p, plan->plan(), plan->workspace());
}

}  // namespace attnkit::cpu
