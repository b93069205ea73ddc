// The text form of an Explanation: what a person deciding how to deploy a model reads.
// Layers with the same outcome share one line; the KV-cache groups follow as a table;
// then, once per distinct configuration, every candidate backend with its reasons.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <map>

#include "attnkit/explain/explain.h"
#include "attnkit/selector/selection_report.h"

namespace attnkit {

namespace {

std::string plural(int n, std::string_view word) {
  return fmt::format("{} {}{}", n, word, n == 1 ? "" : "s");
}

// "sliding_window(512)", plus what else sets the layer apart.
std::string describe_what(const LayerSpec& layer) {
  if (layer.state) return describe_kind(layer);
  if (!layer.is_attention) return layer.layer_type;
  std::string what = describe_kind(layer);
  std::vector<std::string> extras;
  if (layer.attn_type == AttentionType::kEncoder) extras.emplace_back("encoder");
  if (!layer.uses_rope) extras.emplace_back("NoPE");
  if (layer.has_sinks && layer.kind != KvCacheKind::kSinkFullAttention)
    extras.emplace_back("sinks");
  if (layer.soft_cap) extras.push_back(fmt::format("soft-cap {}", *layer.soft_cap));
  if (!extras.empty()) what += fmt::format(" [{}]", fmt::join(extras, ", "));
  return what;
}

std::string describe_shape(const LayerSpec& layer) {
  if (layer.state) {
    // "16x128 keys, 32x128 values, conv 4; 2195456 B state per request"
    const std::string dims = layer.state->describe();
    const std::string_view type = to_string(layer.state->type);
    return fmt::format("{}; {} B state per request", dims.substr(type.size() + 1),
                       layer.state->bytes());
  }
  if (!layer.is_attention) return "";
  if (layer.mla) {
    return fmt::format("{}, MLA latent {} ({} + rope {})", plural(layer.num_heads, "head"),
                       layer.head_size, layer.mla->kv_lora_rank, layer.mla->qk_rope_head_dim);
  }
  std::string head = layer.head_size_v == layer.head_size
                         ? fmt::format("head size {}", layer.head_size)
                         : fmt::format("head size {}/{}", layer.head_size, layer.head_size_v);
  return fmt::format("{} / {} KV, {}", plural(layer.num_heads, "head"), layer.num_kv_heads, head);
}

std::string describe_outcome(const LayerOutcome& outcome) {
  if (!outcome.selection) return "no attention backend needed";
  return fmt::format("-> {} ({})", outcome.selection->backend,
                     to_string(outcome.selection->chosen_by));
}

// One line of the layer table: every layer with the same text in each column.
struct Row {
  std::vector<int> layers;
  std::string what;
  std::string shape;
  std::string outcome;
};

std::vector<Row> layer_rows(const Explanation& e) {
  std::vector<Row> rows;
  std::map<std::string, size_t> index;
  for (const LayerOutcome& o : e.layers) {
    Row row{{o.layer.index}, describe_what(o.layer), describe_shape(o.layer), describe_outcome(o)};
    const std::string key = row.what + "|" + row.shape + "|" + row.outcome;
    auto [it, inserted] = index.emplace(key, rows.size());
    if (inserted) {
      rows.push_back(std::move(row));
    } else {
      rows[it->second].layers.push_back(o.layer.index);
    }
  }
  return rows;
}

std::string describe_spec_kind(const KvCacheSpec& spec) {
  switch (spec.kind) {
    case KvCacheKind::kSlidingWindow:
    case KvCacheKind::kSlidingWindowMla:
      return fmt::format("{}({})", to_string(spec.kind), spec.sliding_window);
    case KvCacheKind::kChunkedLocalAttention:
      return fmt::format("{}({})", to_string(spec.kind), spec.chunk_size);
    case KvCacheKind::kCrossAttention:
      return fmt::format("{}(encoder {})", to_string(spec.kind), spec.max_encoder_len);
    case KvCacheKind::kMamba:
      return fmt::format("{}({})", to_string(spec.kind), to_string(spec.state->type));
    default:
      return std::string(to_string(spec.kind));
  }
}

std::string describe_attention_config(const AttentionConfig& c) {
  std::string out = fmt::format("backend {}", c.backend);
  if (c.backend_source == BackendSource::kEnv) out += " (from ATTNKIT_ATTENTION_BACKEND)";
  if (!c.backend_per_kind.empty()) {
    std::vector<std::string> pairs;
    for (const auto& [kind, backend] : c.backend_per_kind) {
      pairs.push_back(fmt::format("{} -> {}", to_string(kind), backend));
    }
    out += fmt::format("; backend_per_kind: {}", fmt::join(pairs, ", "));
  }
  if (c.phase_backends.prefill)
    out += fmt::format("; prefill_backend {}", *c.phase_backends.prefill);
  if (c.phase_backends.decode) out += fmt::format("; decode_backend {}", *c.phase_backends.decode);
  if (!c.phase_backends_per_kind.empty()) {
    std::vector<std::string> pairs;
    for (const auto& [kind, phases] : c.phase_backends_per_kind) {
      pairs.push_back(fmt::format("{} -> prefill {}, decode {}", to_string(kind),
                                  phases.prefill.value_or("(global)"),
                                  phases.decode.value_or("(global)")));
    }
    out += fmt::format("; per-phase backend_per_kind: {}", fmt::join(pairs, "; "));
  }
  out += fmt::format("; override_mode {}", to_string(c.override_mode));
  return out;
}

void append_layers(const Explanation& e, std::string& out) {
  const std::vector<Row> rows = layer_rows(e);
  size_t w_layers = 0;
  size_t w_what = 0;
  size_t w_shape = 0;
  std::vector<std::string> labels;
  for (const Row& r : rows) {
    const std::string list = format_layer_list(r.layers);
    const bool elided = list.find("...") != std::string::npos;
    labels.push_back(fmt::format("{} {}{}:", r.layers.size() == 1 ? "layer" : "layers", list,
                                 elided ? fmt::format(" ({})", r.layers.size()) : ""));
    w_layers = std::max(w_layers, labels.back().size());
    w_what = std::max(w_what, r.what.size());
    w_shape = std::max(w_shape, r.shape.size());
  }
  const int attention = e.model.num_attention_layers();
  const int states = e.model.num_state_layers();
  if (attention == static_cast<int>(e.layers.size())) {
    out += fmt::format("\nLayers ({}):\n", attention);
  } else if (states > 0) {
    out += fmt::format("\nLayers ({}, of which {} attention and {} state):\n", e.layers.size(),
                       attention, states);
  } else {
    out += fmt::format("\nLayers ({}, of which {} attention):\n", e.layers.size(), attention);
  }
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    if (r.shape.empty()) {
      out += fmt::format("  {:<{}} {}: {}\n", labels[i], w_layers, r.what, r.outcome);
    } else {
      out += fmt::format("  {:<{}} {:<{}}  {:<{}}  {}\n", labels[i], w_layers, r.what, w_what,
                         r.shape, w_shape, r.outcome);
    }
  }
}

void append_kv_groups(const Explanation& e, std::string& out) {
  const KvCacheConfig& kv = e.kv_cache;
  if (kv.groups.empty()) return;
  out += fmt::format("\nKV-cache groups ({}; one block pool, page {} bytes per layer, {}):\n",
                     plural(static_cast<int>(kv.groups.size()), "group"), kv.page_size_bytes,
                     plural(kv.num_buffers, "buffer"));
  struct Line {
    std::string id, kind, layers, backend, block, layout, page, per_token;
  };
  std::vector<Line> lines = {
      {"group", "kind", "layers", "backend", "block", "layout", "page bytes", "KV bytes/token"}};
  size_t total_per_token = 0;
  size_t total_per_request = 0;
  for (const KvCacheGroup& g : kv.groups) {
    std::vector<std::string> layouts;
    for (KvLayout l : g.layer_layouts) {
      const std::string s(to_string(l));
      if (std::find(layouts.begin(), layouts.end(), s) == layouts.end()) layouts.push_back(s);
    }
    Line line;
    line.id = std::to_string(g.group_id);
    line.kind = describe_spec_kind(g.spec);
    line.layers = format_layer_list(g.layer_indices);
    line.backend = fmt::format("{}", fmt::join(g.backend_names(), "+"));
    if (g.spec.is_state()) {
      // One block per request holds each layer's state, padded to the page.
      const size_t state = g.spec.state_bytes() * g.layer_indices.size();
      total_per_request += state;
      line.block = "1/req";
      line.layout = "state";
      line.page = std::to_string(kv.page_size_bytes);
      line.per_token = fmt::format("0 (+{} B/req)", state);
    } else if (g.has_cache()) {
      line.block = g.kernel_block_size == g.cache_block_size()
                       ? std::to_string(g.cache_block_size())
                       : fmt::format("{} ({}x{})", g.cache_block_size(),
                                     g.kernel_blocks_per_block(), g.kernel_block_size);
      line.layout = fmt::format("{}", fmt::join(layouts, "/"));
      line.page = std::to_string(g.spec.page_size_bytes());
      line.per_token = std::to_string(g.bytes_per_token());
      total_per_token += g.bytes_per_token();
    } else {
      // Copies of one std::string: assigning the literals trips GCC 12's -Wrestrict.
      const std::string none = "-";
      line.block = line.layout = line.page = none;
      line.per_token = std::string("0 (no cache)");
    }
    lines.push_back(std::move(line));
  }
  std::array<size_t, 7> w{};
  for (const Line& l : lines) {
    w[0] = std::max(w[0], l.id.size());
    w[1] = std::max(w[1], l.kind.size());
    w[2] = std::max(w[2], l.layers.size());
    w[3] = std::max(w[3], l.backend.size());
    w[4] = std::max(w[4], l.block.size());
    w[5] = std::max(w[5], l.layout.size());
    w[6] = std::max(w[6], l.page.size());
  }
  for (const Line& l : lines) {
    out += fmt::format("  {:<{}}  {:<{}}  {:<{}}  {:<{}}  {:<{}}  {:<{}}  {:>{}}  {:>14}\n", l.id,
                       w[0], l.kind, w[1], l.layers, w[2], l.backend, w[3], l.block, w[4], l.layout,
                       w[5], l.page, w[6], l.per_token);
  }
  out += fmt::format("  KV bytes per token over all layers: {}\n", total_per_token);
  if (total_per_request > 0) {
    out += fmt::format(
        "  State bytes per request over all layers: {} (each layer's state padded "
        "to one {}-byte page)\n",
        total_per_request, kv.page_size_bytes);
  }
}

void append_reasons(const Explanation& e, std::string& out) {
  // Distinct configurations in first-layer order; layers with equal configurations share
  // one selection result.
  std::vector<std::pair<const SelectionResult*, std::vector<int>>> distinct;
  for (const LayerOutcome& o : e.layers) {
    if (!o.selection) continue;
    auto it = std::find_if(distinct.begin(), distinct.end(),
                           [&](const auto& d) { return d.first == o.selection.get(); });
    if (it == distinct.end()) {
      distinct.push_back({o.selection.get(), {o.layer.index}});
    } else {
      it->second.push_back(o.layer.index);
    }
  }
  if (distinct.empty()) return;
  out += fmt::format("\nBackend choice per distinct configuration ({}):\n", distinct.size());
  for (const auto& [selection, layers] : distinct) {
    out += fmt::format("  {} {}:\n", layers.size() == 1 ? "layer" : "layers",
                       format_layer_list(layers));
    out += to_text(*selection, "    ");
  }
}

}  // namespace

std::string to_text(const Explanation& e) {
  const ModelDescription& m = e.model;
  std::string out = fmt::format("Model: {} ({}{}{}), from {}\n", m.name,
                                m.model_type.empty() ? "unknown type" : m.model_type,
                                m.architecture.empty() ? "" : ", ", m.architecture, m.source);
  std::string platform = e.platform.to_string();
  if (e.platform.is_local) {
    platform += " (this machine";
    if (e.platform.kind == PlatformKind::kCpu) {
      const auto features = e.platform.cpu.names();
      if (!features.empty()) platform += fmt::format(": {}", fmt::join(features, " "));
    } else if (!e.platform.device_name.empty()) {
      platform += fmt::format(": {}", e.platform.device_name);
    }
    platform += ")";
  } else {
    platform += " (described, not present)";
  }
  out += fmt::format("Platform: {}\n", platform);
  out += fmt::format("Compute dtype {}, KV cache dtype {}{}, block size {}\n", to_string(e.dtype),
                     to_string(e.kv_cache_dtype),
                     e.kv_cache_dtype != e.resolved_kv_cache_dtype()
                         ? fmt::format(" (= {})", to_string(e.resolved_kv_cache_dtype()))
                         : std::string(),
                     e.block_size ? std::to_string(*e.block_size)
                                  : std::string("chosen per group from its backends"));
  out += fmt::format("Attention config: {}\n", describe_attention_config(e.attention));
  if (!e.runnable) {
    out += fmt::format(
        "\nNote: this binary cannot run this selection on {} here. The choices below follow "
        "the backends' declared capabilities only:\n",
        e.platform.to_string());
    for (const std::string& n : e.notes) out += fmt::format("  {}\n", n);
  }
  for (const std::string& w : e.warnings) out += fmt::format("Warning: {}\n", w);
  for (const auto& [backend, variant] : e.kernel_variants) {
    if (!variant.empty()) out += fmt::format("Kernels of {}: {}\n", backend, variant);
  }
  if (e.platform.kind == PlatformKind::kCuda) {
    for (const auto& [backend, support] : e.cuda_graphs) {
      out += fmt::format("CUDA graphs of {}: {}\n", backend, support);
    }
  }
  std::string options;
  for (const auto& [name, value] : e.options) {
    options += fmt::format("{}{}={}", options.empty() ? "" : " ", name, value);
  }
  out += fmt::format("Options: {}\n", options.empty() ? "defaults (docs/options.md)" : options);
  append_layers(e, out);
  append_kv_groups(e, out);
  append_reasons(e, out);
  return out;
}

}  // namespace attnkit
