// Hybrid models: decoders whose layers mix softmax attention with recurrent-state layers
// (vLLM's `mamba` kind). Each family names its layer pattern and its state sizes in its
// own fields; the readers below follow the Hugging Face configuration classes (and vLLM's
// model files where the class leaves a size to the model code).

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <string_view>

#include "attnkit/core/error.h"
#include "model/families.h"

namespace attnkit::model_detail {
namespace {

// What one position of the model's layer stack holds.
enum class Slot {
  kAttention,          // softmax attention (full, or sliding when the family says so)
  kState,              // a recurrent-state layer
  kAttentionAndState,  // both, side by side (Falcon-H1's parallel hybrid)
  kNeither,            // an MLP or MoE block (Nemotron-H's '-' and 'E'): no cache at all
};

// --- State sizes per layer type ------------------------------------------------------------

int conv_width(const ConfigReader& cfg, std::string_view key) { return cfg.positive_int(key, 64); }

// Mamba1 (Jamba): D = mamba_expand * hidden_size; dt_rank "auto" = ceil(hidden_size / 16).
StateLayerDims mamba1_dims(const ConfigReader& cfg) {
  StateLayerDims d;
  d.type = StateLayerType::kMamba1;
  const int hidden = cfg.positive_int("hidden_size", kMaxModelHiddenSize);
  const int expand = cfg.opt_positive_int("mamba_expand", 64).value_or(2);
  d.inner_size = hidden * expand;
  d.state_size = cfg.positive_int("mamba_d_state", kMaxModelHeadSize);
  d.conv_kernel = conv_width(cfg, "mamba_d_conv");
  const auto& j = cfg.json();
  const auto it = j.find("mamba_dt_rank");
  if (it == j.end() || it->is_null() || (it->is_string() && it->get<std::string>() == "auto")) {
    d.dt_rank = (hidden + 15) / 16;
  } else {
    d.dt_rank = cfg.positive_int("mamba_dt_rank", kMaxModelHiddenSize);
  }
  return d;
}

// The field names of one family's Mamba2 sizes.
struct Mamba2Keys {
  std::string_view heads, head_dim, groups, state, conv, expand;
};
constexpr Mamba2Keys kBambaKeys{"mamba_n_heads", "mamba_d_head", "mamba_n_groups",
                                "mamba_d_state", "mamba_d_conv", "mamba_expand"};
constexpr Mamba2Keys kNemotronHKeys{"mamba_num_heads", "mamba_head_dim", "n_groups",
                                    "ssm_state_size",  "conv_kernel",    "expand"};

// Mamba2: H heads of P dims. A head size given as "auto" (Bamba, Granite) is
// mamba_expand * hidden_size / H.
StateLayerDims mamba2_dims(const ConfigReader& cfg, const Mamba2Keys& k) {
  StateLayerDims d;
  d.type = StateLayerType::kMamba2;
  d.num_heads = cfg.positive_int(k.heads, kMaxModelHeads);
  const auto& j = cfg.json();
  const auto it = j.find(std::string(k.head_dim));
  if (it == j.end() || it->is_null() || it->is_string()) {
    const int hidden = cfg.positive_int("hidden_size", kMaxModelHiddenSize);
    const int expand = cfg.opt_positive_int(k.expand, 64).value_or(2);
    if (hidden * expand % d.num_heads != 0) {
      cfg.fail(k.heads, fmt::format("({}) does not divide {} * hidden_size ({} * {}), from which "
                                    "'{}' is derived",
                                    d.num_heads, k.expand, expand, hidden, k.head_dim));
    }
    d.head_dim = hidden * expand / d.num_heads;
  } else {
    d.head_dim = cfg.positive_int(k.head_dim, kMaxModelHeadSize);
  }
  d.n_groups = cfg.opt_positive_int(k.groups, kMaxModelHeads).value_or(1);
  d.state_size = cfg.positive_int(k.state, kMaxModelHeadSize);
  d.conv_kernel = conv_width(cfg, k.conv);
  return d;
}

// Qwen3-Next's gated delta net.
StateLayerDims gated_delta_net_dims(const ConfigReader& cfg) {
  StateLayerDims d;
  d.type = StateLayerType::kGatedDeltaNet;
  d.num_k_heads = cfg.positive_int("linear_num_key_heads", kMaxModelHeads);
  d.head_k_dim = cfg.positive_int("linear_key_head_dim", kMaxModelHeadSize);
  d.num_heads = cfg.positive_int("linear_num_value_heads", kMaxModelHeads);
  d.head_dim = cfg.positive_int("linear_value_head_dim", kMaxModelHeadSize);
  d.conv_kernel = conv_width(cfg, "linear_conv_kernel_dim");
  return d;
}

// Kimi-Linear's delta attention: linear_attn_config {num_heads, head_dim,
// short_conv_kernel_size}; keys and values have the same heads and size.
StateLayerDims kimi_delta_dims(const ConfigReader& linear) {
  StateLayerDims d;
  d.type = StateLayerType::kKimiDeltaAttention;
  d.num_heads = linear.positive_int("num_heads", kMaxModelHeads);
  d.num_k_heads = d.num_heads;
  d.head_dim = linear.positive_int("head_dim", kMaxModelHeadSize);
  d.head_k_dim = d.head_dim;
  d.conv_kernel = conv_width(linear, "short_conv_kernel_size");
  return d;
}

// LFM2's gated short convolution over the hidden state, conv_L_cache wide.
StateLayerDims short_conv_dims(const ConfigReader& cfg) {
  StateLayerDims d;
  d.type = StateLayerType::kShortConv;
  d.inner_size = cfg.positive_int("hidden_size", kMaxModelHiddenSize);
  d.conv_kernel = conv_width(cfg, "conv_L_cache");
  return d;
}

// MiniMax's lightning attention: the attention heads and head size, no convolution.
StateLayerDims linear_attention_dims(const LayerSpec& attention) {
  StateLayerDims d;
  d.type = StateLayerType::kLinearAttention;
  d.num_heads = attention.num_heads;
  d.head_dim = attention.head_size;
  return d;
}

// RecurrentGemma's RG-LRU: lru_width channels (hidden_size when absent), gate weights in
// num_attention_heads diagonal blocks, a conv1d_width-wide temporal convolution.
StateLayerDims rg_lru_dims(const ConfigReader& cfg) {
  StateLayerDims d;
  d.type = StateLayerType::kRgLru;
  d.inner_size = cfg.opt_positive_int("lru_width", kMaxModelHiddenSize)
                     .value_or(cfg.positive_int("hidden_size", kMaxModelHiddenSize));
  d.num_heads = cfg.positive_int("num_attention_heads", kMaxModelHeads);
  d.conv_kernel = conv_width(cfg, "conv1d_width");
  return d;
}

// --- Layer patterns ----------------------------------------------------------------------

std::vector<Slot> every_nth_attention(int num_layers, int period, int offset) {
  std::vector<Slot> slots(static_cast<size_t>(num_layers), Slot::kState);
  for (int i = 0; i < num_layers; ++i) {
    if (i % period == offset) slots[static_cast<size_t>(i)] = Slot::kAttention;
  }
  return slots;
}

// `layer_types` words of hybrid configs: the attention words and `state_words`.
std::vector<Slot> slots_from_layer_types(const ConfigReader& cfg, int num_layers,
                                         std::initializer_list<std::string_view> state_words,
                                         std::string_view key = "layer_types") {
  const auto types = cfg.opt_string_list(key);
  if (static_cast<int>(types->size()) != num_layers) {
    cfg.fail(key,
             fmt::format("has {} entries but num_hidden_layers is {}", types->size(), num_layers));
  }
  std::vector<Slot> slots;
  for (size_t i = 0; i < types->size(); ++i) {
    const std::string& w = (*types)[i];
    if (w == "full_attention" || w == "attention") {
      slots.push_back(Slot::kAttention);
    } else if (std::find(state_words.begin(), state_words.end(), w) != state_words.end()) {
      slots.push_back(Slot::kState);
    } else {
      std::string valid = "full_attention, attention";
      for (std::string_view s : state_words) valid += fmt::format(", {}", s);
      cfg.fail(key, fmt::format("has unknown value '{}' at index {}. Valid values are: {}", w, i,
                                valid));
    }
  }
  return slots;
}

// A list of layer indices (`base`-based) naming the attention layers.
std::vector<Slot> slots_from_indices(const ConfigReader& cfg, int num_layers, std::string_view key,
                                     int base) {
  std::vector<Slot> slots(static_cast<size_t>(num_layers), Slot::kState);
  const auto list = cfg.opt_int_list(key);
  if (!list) cfg.fail(key, "is missing; it names the attention layers of this hybrid model");
  for (size_t i = 0; i < list->size(); ++i) {
    const int layer = (*list)[i] - base;
    if (layer < 0 || layer >= num_layers) {
      cfg.fail(key, fmt::format("element {} is {}, but layers are {}..{}", i, (*list)[i], base,
                                num_layers - 1 + base));
    }
    slots[static_cast<size_t>(layer)] = Slot::kAttention;
  }
  return slots;
}

// Nemotron-H: one character per layer: M = Mamba2, * = attention, - = MLP, E = MoE.
std::vector<Slot> nemotron_h_slots(const ConfigReader& cfg, int& num_layers) {
  const auto pattern = cfg.opt_string("hybrid_override_pattern");
  if (!pattern) cfg.fail("hybrid_override_pattern", "is missing; it names every layer's block");
  std::vector<Slot> slots;
  for (size_t i = 0; i < pattern->size(); ++i) {
    switch ((*pattern)[i]) {
      case 'M':
        slots.push_back(Slot::kState);
        break;
      case '*':
        slots.push_back(Slot::kAttention);
        break;
      case '-':
      case 'E':
        slots.push_back(Slot::kNeither);
        break;
      default:
        cfg.fail("hybrid_override_pattern",
                 fmt::format("has '{}' at position {}; valid: M (Mamba2), * (attention), - (MLP), "
                             "E (MoE)",
                             (*pattern)[i], i));
    }
  }
  if (slots.size() > static_cast<size_t>(kMaxModelLayers)) {
    cfg.fail("hybrid_override_pattern",
             fmt::format("names {} layers (at most {})", slots.size(), kMaxModelLayers));
  }
  if (cfg.has("num_hidden_layers") &&
      cfg.layer_count("num_hidden_layers") != static_cast<int>(slots.size())) {
    cfg.fail("hybrid_override_pattern",
             fmt::format("names {} layers but num_hidden_layers is {}", slots.size(),
                         cfg.layer_count("num_hidden_layers")));
  }
  num_layers = static_cast<int>(slots.size());
  return slots;
}

// --- Families ------------------------------------------------------------------------------

struct Hybrid {
  std::vector<Slot> slots;
  LayerSpec attention;                  // prototype of the attention layers
  StateLayerDims state;                 // of the state layers
  std::string_view state_word;          // the layer_type written for state layers
  std::optional<int> attention_window;  // attention layers slide (RecurrentGemma)
};

Hybrid read_family(const ConfigReader& cfg, const std::string& model_type) {
  Hybrid h;
  int n = 0;
  if (model_type == "nemotron_h") {
    h.slots = nemotron_h_slots(cfg, n);
  } else {
    n = cfg.layer_count("num_hidden_layers");
  }
  const bool mla = model_type == "kimi_linear";
  h.attention = attention_prototype(cfg, mla);
  if (model_type == "qwen3_next") {
    if (cfg.has("layer_types")) {
      h.slots = slots_from_layer_types(cfg, n, {"linear_attention"});
    } else {
      // Qwen3NextConfig: every full_attention_interval-th layer is full attention.
      const int interval = cfg.opt_positive_int("full_attention_interval").value_or(4);
      h.slots = every_nth_attention(n, interval, interval - 1);
    }
    h.state = gated_delta_net_dims(cfg);
    h.state_word = "linear_attention";
  } else if (model_type == "jamba") {
    const int period = cfg.opt_positive_int("attn_layer_period").value_or(8);
    const int offset = cfg.opt_non_negative_int("attn_layer_offset").value_or(4);
    if (offset >= period) {
      cfg.fail("attn_layer_offset",
               fmt::format("({}) must be below attn_layer_period ({})", offset, period));
    }
    h.slots = every_nth_attention(n, period, offset);
    h.state = mamba1_dims(cfg);
    h.state_word = "mamba";
  } else if (model_type == "nemotron_h") {
    h.state = mamba2_dims(cfg, kNemotronHKeys);
    h.state_word = "mamba";
  } else if (model_type == "bamba") {
    h.slots = slots_from_indices(cfg, n, "attn_layer_indices", 0);
    h.state = mamba2_dims(cfg, kBambaKeys);
    h.state_word = "mamba";
  } else if (model_type == "granitemoehybrid") {
    h.slots = slots_from_layer_types(cfg, n, {"mamba"});
    h.state = mamba2_dims(cfg, kBambaKeys);
    h.state_word = "mamba";
  } else if (model_type == "falcon_h1") {
    h.slots.assign(static_cast<size_t>(n), Slot::kAttentionAndState);
    h.state = mamba2_dims(cfg, kBambaKeys);
    h.state_word = "mamba";
  } else if (model_type == "lfm2") {
    if (cfg.has("layer_types")) {
      h.slots = slots_from_layer_types(cfg, n, {"conv"});
    } else {
      h.slots = slots_from_indices(cfg, n, "full_attn_idxs", 0);
    }
    h.state = short_conv_dims(cfg);
    h.state_word = "conv";
  } else if (model_type == "minimax" || model_type == "minimax_text_01") {
    if (cfg.has("layer_types")) {
      h.slots = slots_from_layer_types(cfg, n, {"linear_attention"});
    } else {
      // attn_type_list: 1 = softmax attention, 0 = lightning (linear) attention.
      const auto list = cfg.opt_int_list("attn_type_list");
      if (!list) cfg.fail("attn_type_list", "is missing (and so is 'layer_types')");
      if (static_cast<int>(list->size()) != n) {
        cfg.fail("attn_type_list",
                 fmt::format("has {} entries but num_hidden_layers is {}", list->size(), n));
      }
      for (size_t i = 0; i < list->size(); ++i) {
        if ((*list)[i] != 0 && (*list)[i] != 1) {
          cfg.fail("attn_type_list",
                   fmt::format("must hold 0 (linear) or 1 (softmax), but element {} is {}", i,
                               (*list)[i]));
        }
        h.slots.push_back((*list)[i] == 1 ? Slot::kAttention : Slot::kState);
      }
    }
    h.state = linear_attention_dims(h.attention);
    h.state_word = "linear_attention";
  } else if (model_type == "kimi_linear") {
    const auto linear = cfg.opt_object("linear_attn_config");
    if (!linear) cfg.fail("linear_attn_config", "is missing; it names the KDA and MLA layers");
    h.slots = slots_from_indices(*linear, n, "full_attn_layers", 1);
    h.state = kimi_delta_dims(*linear);
    h.state_word = "linear_attention";
  } else if (model_type == "recurrent_gemma") {
    const auto blocks = cfg.opt_string_list("block_types");
    if (!blocks || blocks->empty()) cfg.fail("block_types", "is missing or empty");
    for (int i = 0; i < n; ++i) {
      // The block types repeat over the layers (RecurrentGemmaConfig.layers_block_type).
      const std::string& w = (*blocks)[static_cast<size_t>(i) % blocks->size()];
      if (w == "attention") {
        h.slots.push_back(Slot::kAttention);
      } else if (w == "recurrent") {
        h.slots.push_back(Slot::kState);
      } else {
        cfg.fail("block_types",
                 fmt::format("has unknown value '{}'; valid: attention, recurrent", w));
      }
    }
    h.state = rg_lru_dims(cfg);
    h.state_word = "recurrent";
    h.attention_window = cfg.positive_int("attention_window_size", kMaxModelContext);
  }
  return h;
}

}  // namespace

bool is_hybrid_family(const std::string& model_type) {
  using namespace std::string_view_literals;
  static constexpr std::array kTypes = {
      "qwen3_next"sv,       "jamba"sv,       "nemotron_h"sv,     "bamba"sv,
      "granitemoehybrid"sv, "falcon_h1"sv,   "lfm2"sv,           "minimax"sv,
      "minimax_text_01"sv,  "kimi_linear"sv, "recurrent_gemma"sv};
  return std::find(kTypes.begin(), kTypes.end(), model_type) != kTypes.end();
}

void build_hybrid(const ConfigReader& cfg, const std::string& model_type, ModelDescription& desc) {
  Hybrid h = read_family(cfg, model_type);
  try {
    validate_state_dims(h.state);
  } catch (const Error& e) {
    fail_config(cfg.source(),
                fmt::format("the sizes of its {} layers: {}", h.state_word, e.what()));
  }
  auto add_attention = [&](int i) {
    LayerSpec layer = h.attention;
    layer.index = static_cast<int>(desc.layers.size());
    layer.name = fmt::format("layers.{}.self_attn", i);
    layer.layer_type = h.attention_window ? "sliding_attention" : "full_attention";
    layer.sliding_window = h.attention_window;
    desc.layers.push_back(std::move(layer));
  };
  auto add_state = [&](int i) {
    LayerSpec layer;
    layer.index = static_cast<int>(desc.layers.size());
    layer.name = fmt::format("layers.{}.{}", i, to_string(h.state.type));
    layer.layer_type = std::string(h.state_word);
    layer.is_attention = false;
    layer.kind = KvCacheKind::kMamba;
    layer.state = h.state;
    desc.layers.push_back(std::move(layer));
  };
  for (size_t i = 0; i < h.slots.size(); ++i) {
    const int index = static_cast<int>(i);
    switch (h.slots[i]) {
      case Slot::kAttention:
        add_attention(index);
        break;
      case Slot::kState:
        add_state(index);
        break;
      case Slot::kAttentionAndState:
        add_attention(index);
        add_state(index);
        break;
      case Slot::kNeither: {
        LayerSpec layer;
        layer.index = static_cast<int>(desc.layers.size());
        layer.name = fmt::format("layers.{}.mlp", index);
        layer.layer_type = "mlp";
        layer.is_attention = false;
        desc.layers.push_back(std::move(layer));
        break;
      }
    }
  }
}

}  // namespace attnkit::model_detail
