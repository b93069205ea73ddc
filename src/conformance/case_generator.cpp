// Turns a backend's capabilities into conformance cases. Every axis the capabilities
// declare is varied one at a time around a base case (the quick budget), or crossed with
// the dtypes and stretched to long contexts (the full budget). Cases the flat capability
// list rejects are never generated; the backend's combination hook may still reject a
// case at run time, which reports it as skipped.

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "attnkit/backend/capabilities.h"
#include "attnkit/conformance/conformance.h"
#include "conformance/state_cases.h"

namespace attnkit::conformance {
namespace {

uint64_t fnv1a(std::string_view text, uint64_t seed) {
  uint64_t h = 1469598103934665603ull ^ seed;
  for (char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ull;
  }
  return h;
}

// A query/sequence-length pattern for one step.
struct BatchMix {
  std::string name;
  std::vector<int> query_lens;
  std::vector<int> seq_lens;
};

// Prefill from scratch, a prefill chunk over cached context, and decodes (one with a
// single-token context).
BatchMix mixed_batch() { return {"mixed", {37, 12, 1, 1}, {37, 300, 1, 700}}; }
BatchMix decode_batch(Budget b) {
  if (b == Budget::kFull) return {"decode", {1, 1, 1, 1, 1}, {1, 100, 513, 2049, 4100}};
  return {"decode", {1, 1, 1, 1, 1}, {1, 17, 64, 255, 1200}};
}
BatchMix prefill_batch(Budget b) {
  if (b == Budget::kFull) return {"prefill", {1, 200, 777}, {1, 200, 777}};
  return {"prefill", {1, 7, 64}, {1, 7, 64}};
}
BatchMix long_batch() { return {"long", {200, 1, 1}, {3000, 4096, 3500}}; }

class Generator {
 public:
  Generator(const AttentionBackend& backend, Budget budget, uint64_t seed)
      : backend_(backend), caps_(backend.capabilities()), budget_(budget), seed_(seed) {
    platform_.kind = caps_.platform;
    if (caps_.platform == PlatformKind::kCuda) {
      // Any architecture inside the declared range: the generator filters by the flat
      // capability list only; the real device decides at run time.
      const int cc = std::max(caps_.min_compute_capability, 80);
      platform_.cc_major = cc / 10;
      platform_.cc_minor = cc % 10;
    }
    for (DType d : {DType::kBFloat16, DType::kFloat16, DType::kFloat32}) {
      if (std::find(caps_.dtypes.begin(), caps_.dtypes.end(), d) != caps_.dtypes.end()) {
        dtypes_.push_back(d);
      }
    }
    for (int h : {128, 64, 256, 96, 80, 32, 112, 192, 72, 40, 24, 16, 160, 8}) {
      if (caps_.head_sizes.allows(h)) head_sizes_.push_back(h);
    }
    for (int b : {caps_.preferred_block_size, 16, 32, 1, 64, 8, 128, 5, 256}) {
      if (b > 0 && caps_.kernel_block_sizes.allows(b) &&
          std::find(block_sizes_.begin(), block_sizes_.end(), b) == block_sizes_.end()) {
        block_sizes_.push_back(b);
      }
    }
  }

  std::vector<ConformanceCase> generate() {
    if (dtypes_.empty() || block_sizes_.empty()) return {};
    if (!caps_.mla_only && !head_sizes_.empty()) standard_cases();
    if (caps_.mla) mla_cases();
    return std::move(cases_);
  }

 private:
  bool full() const { return budget_ == Budget::kFull; }

  ConformanceCase base(int head_size, DType dtype) const {
    ConformanceCase c;
    c.layer.num_heads = 8;
    c.layer.num_kv_heads = 2;
    c.layer.head_size = head_size;
    c.layer.head_size_v = head_size;
    c.layer.scale = 1.0f / std::sqrt(static_cast<float>(head_size));
    c.layer.dtype = dtype;
    c.layer.kv_cache_dtype = KvCacheDType::kAuto;
    c.layout = backend_.kv_layout();
    c.block_size = block_sizes_.front();
    set_batch(c, mixed_batch());
    return c;
  }

  static void set_batch(ConformanceCase& c, const BatchMix& mix) {
    c.name = mix.name;
    c.query_lens = mix.query_lens;
    c.seq_lens = mix.seq_lens;
  }

  static void set_kv_dtype(ConformanceCase& c, KvCacheDType kv) {
    c.layer.kv_cache_dtype = kv;
    if (is_fp8(kv)) {
      // Inputs are within [-3, 3]; these scales put them well inside both fp8 ranges
      // without being powers of two.
      c.layer.k_scale = 0.0173f;
      c.layer.v_scale = 0.0291f;
    }
  }

  // Appends `c` (named `<batch>/<axes>`) when the flat capability list accepts it.
  void add(ConformanceCase c, const std::string& tag = "") {
    const AttentionLayerParams& L = c.layer;
    std::string name = fmt::format("{}/{}/kv={}/h{}", c.name, to_string(L.dtype),
                                   to_string(L.kv_cache_dtype), L.head_size);
    if (L.head_size_v != L.head_size) name += fmt::format("v{}", L.head_size_v);
    name += fmt::format("/q{}kv{}/bs{}/{}", L.num_heads, L.num_kv_heads, c.block_size,
                        to_string(c.layout));
    if (L.attn_type != AttentionType::kDecoder) name += fmt::format("/{}", to_string(L.attn_type));
    if (L.use_mla) name += "/mla";
    if (L.sliding_window) name += fmt::format("/window={}", L.sliding_window);
    if (L.chunk_size) name += fmt::format("/chunk={}", L.chunk_size);
    if (!L.sinks.empty()) name += "/sinks";
    if (L.soft_cap > 0) name += fmt::format("/softcap={:g}", L.soft_cap);
    if (!tag.empty()) name += "/" + tag;
    c.name = name;
    if (!names_.insert(name).second) return;
    if (!validate_capabilities(caps_, c.selector_config(), platform_).empty()) return;
    if (c.layout != backend_.kv_layout() && caps_.required_layout) return;
    c.seed = fnv1a(name, seed_);
    cases_.push_back(std::move(c));
  }

  std::vector<float> sinks(int heads) const {
    std::vector<float> s;
    s.reserve(static_cast<size_t>(heads));
    for (int h = 0; h < heads; ++h) s.push_back(-1.0f + 0.7f * static_cast<float>(h % 6));
    return s;
  }

  void standard_cases() {
    const DType d0 = dtypes_.front();
    const int h0 = head_sizes_.front();
    // Every compute dtype, and every KV-cache dtype (crossed with every dtype when full).
    for (DType d : dtypes_) add(base(h0, d));
    for (DType d : dtypes_) {
      if (!full() && d != d0) continue;
      for (KvCacheDType kv : caps_.kv_cache_dtypes) {
        if (kv == KvCacheDType::kAuto) continue;
        ConformanceCase c = base(h0, d);
        set_kv_dtype(c, kv);
        add(c);
      }
    }
    // Head sizes, and a separate V head size.
    const size_t n_heads = full() ? head_sizes_.size() : std::min<size_t>(3, head_sizes_.size());
    for (size_t i = 1; i < n_heads; ++i) add(base(head_sizes_[i], d0));
    if (caps_.separate_v_head_size) {
      for (auto [h, v] : {std::pair{192, 128}, {128, 64}, {96, 64}, {64, 32}, {32, 16}}) {
        if (!caps_.head_sizes.allows(h) || !caps_.head_sizes.allows(v)) continue;
        ConformanceCase c = base(h, d0);
        c.layer.head_size_v = v;
        add(c);
        if (!full()) break;
      }
    }
    // GQA ratios: MHA, MQA, 4:1 (the base), 8:1 and an odd group (full).
    std::vector<std::pair<int, int>> heads = {{8, 8}, {8, 1}};
    if (full()) heads.insert(heads.end(), {{16, 2}, {12, 4}, {6, 3}});
    for (auto [q, kv] : heads) {
      ConformanceCase c = base(h0, d0);
      c.layer.num_heads = q;
      c.layer.num_kv_heads = kv;
      add(c);
    }
    // Block sizes and the other KV layout.
    const size_t n_blocks = full() ? block_sizes_.size() : std::min<size_t>(3, block_sizes_.size());
    for (size_t i = 1; i < n_blocks; ++i) {
      ConformanceCase c = base(h0, d0);
      c.block_size = block_sizes_[i];
      add(c);
    }
    if (!caps_.required_layout) {
      ConformanceCase c = base(h0, d0);
      c.layout = c.layout == KvLayout::kNHD ? KvLayout::kHND : KvLayout::kNHD;
      add(c);
    }
    // Batch shapes.
    std::vector<BatchMix> mixes = {decode_batch(budget_), prefill_batch(budget_)};
    if (full()) mixes.push_back(long_batch());
    for (DType d : dtypes_) {
      if (!full() && d != d0) continue;
      for (const BatchMix& mix : mixes) {
        ConformanceCase c = base(h0, d);
        set_batch(c, mix);
        add(c);
      }
    }
    feature_cases(d0, h0);
    attention_type_cases(d0, h0);
  }

  void feature_cases(DType d0, int h0) {
    for (DType d : dtypes_) {
      if (!full() && d != d0) continue;
      std::vector<int> windows = {64};
      if (full()) windows.insert(windows.end(), {1, 5000});
      for (int w : windows) {
        ConformanceCase c = base(h0, d);
        c.layer.sliding_window = w;
        add(c);
      }
      {
        ConformanceCase c = base(h0, d);
        set_batch(c, decode_batch(budget_));
        c.layer.sliding_window = 100;
        add(c);
      }
      std::vector<int> chunks = {128};
      if (full()) chunks.push_back(16);
      for (int chunk : chunks) {
        ConformanceCase c = base(h0, d);
        c.layer.chunk_size = chunk;
        add(c);
      }
      ConformanceCase sink = base(h0, d);
      sink.layer.sinks = sinks(sink.layer.num_heads);
      add(sink);
      ConformanceCase cap = base(h0, d);
      cap.layer.soft_cap = 2.5f;
      add(cap);
      ConformanceCase scale = base(h0, d);
      scale.layer.scale = 0.31f;
      add(scale, "scale=0.31");
      // Combinations real models use: window + sinks (gpt-oss), window + soft-cap (Gemma 2).
      ConformanceCase ws = base(h0, d);
      ws.layer.sliding_window = 128;
      ws.layer.sinks = sinks(ws.layer.num_heads);
      add(ws);
      ConformanceCase wc = base(h0, d);
      wc.layer.sliding_window = 32;
      wc.layer.soft_cap = 4.0f;
      add(wc);
      // fp8 KV with a feature.
      for (KvCacheDType kv : caps_.kv_cache_dtypes) {
        if (!is_fp8(kv)) continue;
        ConformanceCase c = base(h0, d);
        set_kv_dtype(c, kv);
        c.layer.sliding_window = 64;
        c.layer.sinks = sinks(c.layer.num_heads);
        add(c);
        if (!full()) break;
      }
    }
  }

  void attention_type_cases(DType d0, int h0) {
    for (DType d : dtypes_) {
      if (!full() && d != d0) continue;
      for (AttentionType type : {AttentionType::kEncoderOnly, AttentionType::kEncoder}) {
        ConformanceCase c = base(h0, d);
        c.layer.attn_type = type;
        c.query_lens = {1, 50, 130};
        c.seq_lens = c.query_lens;
        c.name = "prefill";
        add(c);
      }
      ConformanceCase cross = base(h0, d);
      cross.layer.attn_type = AttentionType::kEncoderDecoder;
      cross.name = "cross";
      cross.query_lens = {1, 6, 3};                   // decoder tokens this step
      cross.seq_lens = {full() ? 1500 : 300, 30, 1};  // encoder lengths
      add(cross);
    }
  }

  void mla_cases() {
    const int latent = 576, rank = 512, rope = 64;
    if (!caps_.head_sizes.allows(latent)) return;
    for (DType d : dtypes_) {
      if (!full() && d != dtypes_.front()) continue;
      std::vector<KvCacheDType> kvs = {KvCacheDType::kAuto};
      for (KvCacheDType kv : caps_.kv_cache_dtypes) {
        if (kv != KvCacheDType::kAuto && (full() || is_fp8(kv))) kvs.push_back(kv);
      }
      for (KvCacheDType kv : kvs) {
        for (const BatchMix& mix : {BatchMix{"decode", {1, 1, 1}, {1, 300, full() ? 4000 : 1000}},
                                    BatchMix{"mixed", {20, 10, 1}, {20, 200, 77}}}) {
          ConformanceCase c;
          c.layer.num_heads = full() ? 16 : 8;
          c.layer.num_kv_heads = 1;
          c.layer.head_size = latent;
          c.layer.head_size_v = rank;
          c.layer.use_mla = true;
          c.layer.mla_rope_dim = rope;
          // DeepSeek's scale: 1/sqrt(qk_nope + qk_rope) = 1/sqrt(192).
          c.layer.scale = 1.0f / std::sqrt(192.0f);
          c.layer.dtype = d;
          set_kv_dtype(c, kv);
          // One latent cache, one scale: V is read from the bytes K wrote with k_scale.
          c.layer.v_scale = c.layer.k_scale;
          c.layout = backend_.kv_layout();
          c.block_size = block_sizes_.front();
          set_batch(c, mix);
          add(c);
          if (caps_.sliding_window && kv == KvCacheDType::kAuto && mix.name == "decode") {
            c.layer.sliding_window = 128;
            set_batch(c, mix);
            add(c);
          }
        }
      }
    }
  }

  const AttentionBackend& backend_;
  const BackendCapabilities& caps_;
  Budget budget_;
  uint64_t seed_;
  Platform platform_;
  std::vector<DType> dtypes_;
  std::vector<int> head_sizes_;
  std::vector<int> block_sizes_;
  std::set<std::string> names_;
  std::vector<ConformanceCase> cases_;
};

}  // namespace

SelectorConfig ConformanceCase::selector_config() const {
  SelectorConfig c;
  if (layer.state) {
    c.state = layer.state;
    c.dtype = layer.dtype;
    c.kv_cache_dtype = layer.kv_cache_dtype;
    c.head_size = c.head_size_v = 0;
    return c;
  }
  c.head_size = layer.head_size;
  c.head_size_v = layer.head_size_v;
  c.num_heads = layer.num_heads;
  c.num_kv_heads = layer.num_kv_heads;
  c.dtype = layer.dtype;
  c.kv_cache_dtype = layer.kv_cache_dtype;
  c.block_size = block_size;
  c.use_mla = layer.use_mla;
  c.mla_rope_dim = layer.mla_rope_dim;
  c.has_sinks = !layer.sinks.empty();
  if (layer.sliding_window > 0) c.sliding_window = layer.sliding_window;
  if (layer.chunk_size > 0) c.chunk_size = layer.chunk_size;
  if (layer.soft_cap > 0) c.soft_cap = layer.soft_cap;
  c.attn_type = layer.attn_type;
  return c;
}

double ConformanceCase::work() const {
  double total = 0;
  for (size_t i = 0; i < query_lens.size(); ++i) {
    total += static_cast<double>(query_lens[i]) * seq_lens[i];
  }
  return total * layer.num_heads * (layer.head_size + layer.head_size_v);
}

std::vector<ConformanceCase> generate_cases(const AttentionBackend& backend, Budget budget,
                                            uint64_t seed) {
  if (!backend.capabilities().state_layer_types.empty()) {
    return generate_state_cases(backend, budget, seed);
  }
  return Generator(backend, budget, seed).generate();
}

}  // namespace attnkit::conformance
