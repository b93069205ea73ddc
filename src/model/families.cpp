#include "model/families.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <iterator>
#include <limits>
#include <string_view>

#include "attnkit/core/error.h"

namespace attnkit::model_detail {

namespace {

// ---------------------------------------------------------------------------------------
// Layer types: the words configs use in `layer_types`, and what each means here.

enum class Category { kFull, kSliding, kChunked, kNone };

struct LayerTypeWord {
  std::string_view word;
  Category category;
};

constexpr std::array kLayerTypeWords = {
    LayerTypeWord{"full_attention", Category::kFull},
    LayerTypeWord{"attention", Category::kFull},
    LayerTypeWord{"global_attention", Category::kFull},
    LayerTypeWord{"sliding_attention", Category::kSliding},
    LayerTypeWord{"sliding_window", Category::kSliding},
    LayerTypeWord{"local_attention", Category::kSliding},
    LayerTypeWord{"chunked_attention", Category::kChunked},
    LayerTypeWord{"chunked_local_attention", Category::kChunked},
    // Layers of hybrid models that are not softmax attention: no attention backend.
    LayerTypeWord{"linear_attention", Category::kNone},
    LayerTypeWord{"mamba", Category::kNone},
    LayerTypeWord{"mamba2", Category::kNone},
    LayerTypeWord{"conv", Category::kNone},
    LayerTypeWord{"recurrent", Category::kNone},
};

std::string valid_layer_type_words() {
  std::vector<std::string> words;
  words.reserve(std::size(kLayerTypeWords));
  for (const auto& w : kLayerTypeWords) words.emplace_back(w.word);
  std::sort(words.begin(), words.end());
  return fmt::format("{}", fmt::join(words, ", "));
}

Category category_of(const ConfigReader& cfg, const std::string& word, size_t index) {
  for (const auto& w : kLayerTypeWords) {
    if (w.word == word) return w.category;
  }
  cfg.fail("layer_types", fmt::format("has unknown value '{}' at index {}. Valid values are: {}",
                                      word, index, valid_layer_type_words()));
}

std::string_view canonical_word(Category c) {
  switch (c) {
    case Category::kFull:
      return "full_attention";
    case Category::kSliding:
      return "sliding_attention";
    case Category::kChunked:
      return "chunked_attention";
    case Category::kNone:
      break;
  }
  return "none";
}

// ---------------------------------------------------------------------------------------
// Decoder families.

enum class Pattern {
  kAllFull,       // every layer full attention (sliding_window ignored)
  kAllSliding,    // every layer slides when sliding_window is set, else full
  kQwen2,         // use_sliding_window: layers >= max_window_layers slide
  kEveryNthFull,  // layer i is full when (i + 1) % period == 0, else sliding
  kLlama4,        // chunked attention on RoPE layers, full on NoPE layers
  kMla,           // DeepSeek multi-head latent attention, every layer
};

struct DecoderFamily {
  std::string_view model_type;
  Pattern pattern;
  int period = 0;                    // kEveryNthFull: default period
  std::string_view period_key = "";  // kEveryNthFull: config field overriding the period
  bool sinks = false;                // learned sink logits on every layer
};

constexpr std::array kDecoderFamilies = {
    DecoderFamily{"llama", Pattern::kAllFull},
    DecoderFamily{"mistral", Pattern::kAllSliding},
    DecoderFamily{"mixtral", Pattern::kAllSliding},
    DecoderFamily{"phi3", Pattern::kAllSliding},
    DecoderFamily{"qwen2", Pattern::kQwen2},
    DecoderFamily{"qwen2_moe", Pattern::kQwen2},
    DecoderFamily{"qwen3", Pattern::kQwen2},
    DecoderFamily{"qwen3_moe", Pattern::kQwen2},
    DecoderFamily{"gemma2", Pattern::kEveryNthFull, 2},
    DecoderFamily{"gemma3", Pattern::kEveryNthFull, 6, "sliding_window_pattern"},
    DecoderFamily{"gemma3_text", Pattern::kEveryNthFull, 6, "sliding_window_pattern"},
    DecoderFamily{"cohere2", Pattern::kEveryNthFull, 4, "sliding_window_pattern"},
    // Gemma-4's full layers have a head size (and KV heads) of their own: global_head_dim,
    // num_global_key_value_heads (global_attention_shape below).
    DecoderFamily{"gemma4", Pattern::kEveryNthFull, 6, "sliding_window_pattern"},
    DecoderFamily{"gemma4_text", Pattern::kEveryNthFull, 6, "sliding_window_pattern"},
    DecoderFamily{"gpt_oss", Pattern::kEveryNthFull, 2, "", /*sinks=*/true},
    DecoderFamily{"llama4", Pattern::kLlama4},
    DecoderFamily{"llama4_text", Pattern::kLlama4},
    DecoderFamily{"deepseek_v2", Pattern::kMla},
    DecoderFamily{"deepseek_v3", Pattern::kMla},
    // DeepSeek-V3.2 adds a sparse-attention indexer over the same MLA cache; the indexer's
    // own small key cache is not modelled here.
    DecoderFamily{"deepseek_v32", Pattern::kMla},
    DecoderFamily{"kimi_k2", Pattern::kMla},
};

const DecoderFamily* find_decoder_family(const std::string& model_type) {
  for (const auto& f : kDecoderFamilies) {
    if (f.model_type == model_type) return &f;
  }
  return nullptr;
}

float inverse_sqrt(double x) { return static_cast<float>(1.0 / std::sqrt(x)); }

// K/Q head size: head_dim when given, else hidden_size / num_attention_heads.
int head_size_of(const ConfigReader& cfg, int num_heads, std::string_view head_key = "head_dim",
                 std::string_view hidden_key = "hidden_size",
                 std::string_view heads_key = "num_attention_heads") {
  if (auto h = cfg.opt_positive_int(head_key, kMaxModelHeadSize)) return *h;
  if (!cfg.has(hidden_key)) {
    cfg.fail(head_key, fmt::format("is missing (and so is '{}', from which it is derived)",
                                   cfg.path_of(hidden_key)));
  }
  const int hidden = cfg.positive_int(hidden_key, kMaxModelHiddenSize);
  if (hidden % num_heads != 0) {
    cfg.fail(hidden_key,
             fmt::format("({}) is not a multiple of {} ({}), and '{}' is not given", hidden,
                         cfg.path_of(heads_key), num_heads, cfg.path_of(head_key)));
  }
  return hidden / num_heads;
}

int kv_heads_of(const ConfigReader& cfg, int num_heads) {
  const int kv = cfg.opt_positive_int("num_key_value_heads", kMaxModelHeads).value_or(num_heads);
  if (num_heads % kv != 0) {
    cfg.fail("num_key_value_heads",
             fmt::format("({}) must divide num_attention_heads ({})", kv, num_heads));
  }
  return kv;
}

// A value the kernels compute with in float32 (a softmax scale, a soft-cap): refused
// unless it is a normal positive float32, so that no field can make every score NaN, inf
// or 0 (a run would otherwise finish with NaN outputs and exit 0).
float positive_float32(const ConfigReader& cfg, std::string_view key, double value,
                       std::string_view what) {
  const auto f = static_cast<float>(value);
  if (!(std::isfinite(value) && std::isnormal(f) && f > 0)) {
    cfg.fail(key, fmt::format("gives {} {} (as float32: {}); it must be a positive, finite, "
                              "normal float32 ({:g} to {:g})",
                              what, value, f, std::numeric_limits<float>::min(),
                              std::numeric_limits<float>::max()));
  }
  return f;
}

// Softmax scale of a decoder layer: Gemma scales queries by query_pre_attn_scalar^-0.5
// instead of head_dim^-0.5.
float decoder_scale(const ConfigReader& cfg, int head_size) {
  if (auto q = cfg.opt_number("query_pre_attn_scalar")) {
    if (*q <= 0) {
      cfg.fail("query_pre_attn_scalar", fmt::format("must be positive, got {}", *q));
    }
    return positive_float32(cfg, "query_pre_attn_scalar", 1.0 / std::sqrt(*q), "a softmax scale");
  }
  return inverse_sqrt(head_size);
}

std::optional<float> soft_cap_of(const ConfigReader& cfg) {
  auto cap = cfg.opt_number("attn_logit_softcapping");
  if (!cap) return std::nullopt;
  if (*cap < 0) {
    cfg.fail("attn_logit_softcapping", fmt::format("must be positive or null, got {}", *cap));
  }
  if (*cap == 0) return std::nullopt;
  return positive_float32(cfg, "attn_logit_softcapping", *cap, "a soft-cap");
}

// Llama-4: no_rope_layers[i] == 1 means layer i uses RoPE, 0 means NoPE. An empty or
// absent list defaults (as in Llama4TextConfig) to NoPE on every no_rope_layer_interval-th
// layer: uses_rope = (i + 1) % interval != 0.
std::vector<bool> llama4_rope_layers(const ConfigReader& cfg, int num_layers) {
  std::vector<bool> rope(static_cast<size_t>(num_layers), true);
  auto list = cfg.opt_int_list("no_rope_layers").value_or(std::vector<int>{});
  if (list.empty()) {
    const int interval = cfg.opt_positive_int("no_rope_layer_interval").value_or(4);
    for (int i = 0; i < num_layers; ++i) rope[static_cast<size_t>(i)] = (i + 1) % interval != 0;
    return rope;
  }
  if (static_cast<int>(list.size()) != num_layers) {
    cfg.fail("no_rope_layers",
             fmt::format("has {} entries but num_hidden_layers is {}", list.size(), num_layers));
  }
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i] != 0 && list[i] != 1) {
      cfg.fail("no_rope_layers",
               fmt::format("must hold 0 (NoPE) or 1 (RoPE), but element {} is {}", i, list[i]));
    }
    rope[i] = list[i] == 1;
  }
  return rope;
}

// The category of every layer when the config has no layer_types.
std::vector<Category> default_categories(const ConfigReader& cfg, const DecoderFamily& family,
                                         int num_layers, const std::vector<bool>& rope) {
  std::vector<Category> out(static_cast<size_t>(num_layers), Category::kFull);
  switch (family.pattern) {
    case Pattern::kAllFull:
    case Pattern::kMla:
      break;
    case Pattern::kAllSliding:
      if (cfg.has("sliding_window")) std::fill(out.begin(), out.end(), Category::kSliding);
      break;
    case Pattern::kQwen2:
      if (cfg.opt_bool("use_sliding_window").value_or(false) && cfg.has("sliding_window")) {
        // Qwen2Config's default max_window_layers is 28.
        const int first = cfg.opt_non_negative_int("max_window_layers").value_or(28);
        for (int i = first; i < num_layers; ++i) out[static_cast<size_t>(i)] = Category::kSliding;
      }
      break;
    case Pattern::kEveryNthFull: {
      int period = family.period;
      if (!family.period_key.empty()) {
        period = cfg.opt_positive_int(family.period_key).value_or(period);
      }
      for (int i = 0; i < num_layers; ++i) {
        if ((i + 1) % period != 0) out[static_cast<size_t>(i)] = Category::kSliding;
      }
      break;
    }
    case Pattern::kLlama4:
      if (cfg.has("attention_chunk_size")) {
        for (size_t i = 0; i < out.size(); ++i) {
          if (rope[i]) out[i] = Category::kChunked;
        }
      }
      break;
  }
  return out;
}

}  // namespace

LayerSpec attention_prototype(const ConfigReader& cfg, bool latent) {
  const int num_heads = cfg.positive_int("num_attention_heads", kMaxModelHeads);
  LayerSpec proto;
  proto.attn_type = AttentionType::kDecoder;
  proto.num_heads = num_heads;
  proto.soft_cap = soft_cap_of(cfg);
  if (latent) {
    MlaDims mla;
    mla.kv_lora_rank = cfg.positive_int("kv_lora_rank", kMaxModelLatentRank);
    mla.qk_rope_head_dim = cfg.positive_int("qk_rope_head_dim", kMaxModelRopeHeadDim);
    mla.qk_nope_head_dim = cfg.positive_int("qk_nope_head_dim", kMaxModelRopeHeadDim);
    mla.v_head_dim = cfg.positive_int("v_head_dim", kMaxModelHeadSize);
    mla.q_lora_rank = cfg.opt_positive_int("q_lora_rank", kMaxModelLatentRank);
    proto.mla = mla;
    // The absorbed form caches one latent vector per token and reads V from its prefix.
    proto.num_kv_heads = 1;
    proto.head_size = mla.kv_lora_rank + mla.qk_rope_head_dim;
    proto.head_size_v = mla.kv_lora_rank;
    // Scores are taken over the full query-key dim (nope + rope); YaRN rope scaling
    // multiplies the scale by mscale^2 with mscale = 0.1 * mscale_all_dim * ln(factor) + 1.
    double scale = 1.0 / std::sqrt(static_cast<double>(mla.qk_nope_head_dim) +
                                   static_cast<double>(mla.qk_rope_head_dim));
    std::string_view scale_key = "qk_nope_head_dim";
    if (auto rope = cfg.opt_object("rope_scaling")) {
      const double all_dim = rope->opt_number("mscale_all_dim").value_or(0.0);
      const double factor = rope->opt_number("factor").value_or(1.0);
      if (all_dim != 0.0 && factor > 1.0) {
        const double mscale = 0.1 * all_dim * std::log(factor) + 1.0;
        scale *= mscale * mscale;
        scale_key = "rope_scaling.mscale_all_dim";
      }
    }
    proto.scale = positive_float32(cfg, scale_key, scale, "a softmax scale");
  } else {
    proto.num_kv_heads = kv_heads_of(cfg, num_heads);
    proto.head_size = head_size_of(cfg, num_heads);
    proto.head_size_v = proto.head_size;
    proto.scale = decoder_scale(cfg, proto.head_size);
  }
  return proto;
}

bool has_mla_fields(const ConfigReader& cfg) {
  return cfg.has("kv_lora_rank") && cfg.has("qk_rope_head_dim");
}

namespace {

// Per-layer head sizes: configs that give full-attention layers a head size of their own
// (Gemma-4's global_head_dim, with num_global_key_value_heads) apply it there; the
// softmax scale follows the layer's head size.
void global_attention_shape(const ConfigReader& cfg, LayerSpec& layer) {
  const auto head = cfg.opt_positive_int("global_head_dim", kMaxModelHeadSize);
  if (!head) return;
  layer.head_size = layer.head_size_v = *head;
  layer.scale = decoder_scale(cfg, *head);
  if (auto kv = cfg.opt_positive_int("num_global_key_value_heads", kMaxModelHeads)) {
    if (layer.num_heads % *kv != 0) {
      cfg.fail("num_global_key_value_heads",
               fmt::format("({}) must divide num_attention_heads ({})", *kv, layer.num_heads));
    }
    layer.num_kv_heads = *kv;
  }
}

void build_decoder(const ConfigReader& cfg, const DecoderFamily& family, ModelDescription& desc) {
  const int num_layers = cfg.layer_count("num_hidden_layers");
  // vLLM recognises MLA by its fields, whatever the family.
  LayerSpec proto =
      attention_prototype(cfg, family.pattern == Pattern::kMla || has_mla_fields(cfg));
  proto.has_sinks = family.sinks;

  std::vector<bool> rope(static_cast<size_t>(num_layers), true);
  if (family.pattern == Pattern::kLlama4) rope = llama4_rope_layers(cfg, num_layers);

  std::vector<Category> categories;
  std::vector<std::string> words;
  if (auto types = cfg.opt_string_list("layer_types")) {
    if (static_cast<int>(types->size()) != num_layers) {
      cfg.fail("layer_types", fmt::format("has {} entries but num_hidden_layers is {}",
                                          types->size(), num_layers));
    }
    for (size_t i = 0; i < types->size(); ++i) {
      categories.push_back(category_of(cfg, (*types)[i], i));
      words.push_back((*types)[i]);
    }
  } else {
    categories = default_categories(cfg, family, num_layers, rope);
    for (Category c : categories) words.emplace_back(canonical_word(c));
  }

  for (int i = 0; i < num_layers; ++i) {
    const auto ui = static_cast<size_t>(i);
    LayerSpec layer = proto;
    layer.index = static_cast<int>(desc.layers.size());
    layer.layer_type = words[ui];
    layer.uses_rope = rope[ui];
    switch (categories[ui]) {
      case Category::kNone:
        layer = LayerSpec{};
        layer.index = static_cast<int>(desc.layers.size());
        layer.layer_type = words[ui];
        layer.is_attention = false;
        layer.name = fmt::format("layers.{}.{}", i, words[ui]);
        desc.layers.push_back(std::move(layer));
        continue;
      case Category::kSliding:
        if (!cfg.has("sliding_window")) {
          cfg.fail("sliding_window", fmt::format("is missing, but layer {} is '{}'", i, words[ui]));
        }
        layer.sliding_window = cfg.positive_int("sliding_window", kMaxModelContext);
        break;
      case Category::kChunked:
        if (!cfg.has("attention_chunk_size")) {
          cfg.fail("attention_chunk_size",
                   fmt::format("is missing, but layer {} is '{}'", i, words[ui]));
        }
        layer.chunk_size = cfg.positive_int("attention_chunk_size", kMaxModelContext);
        break;
      case Category::kFull:
        if (!layer.mla) global_attention_shape(cfg, layer);
        break;
    }
    layer.name = fmt::format("layers.{}.self_attn", i);
    desc.layers.push_back(std::move(layer));
  }
}

// ---------------------------------------------------------------------------------------
// Encoder-only (BERT) and encoder-decoder (Whisper, BART, T5) families.

bool is_one_of(const std::string& s, std::initializer_list<std::string_view> list) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

void build_encoder_only(const ConfigReader& cfg, ModelDescription& desc) {
  const int num_layers = cfg.layer_count("num_hidden_layers");
  const int num_heads = cfg.positive_int("num_attention_heads", kMaxModelHeads);
  LayerSpec layer;
  layer.layer_type = "encoder_attention";
  layer.attn_type = AttentionType::kEncoderOnly;
  layer.num_heads = num_heads;
  layer.num_kv_heads = num_heads;
  layer.head_size = head_size_of(cfg, num_heads);
  layer.head_size_v = layer.head_size;
  layer.scale = inverse_sqrt(layer.head_size);
  for (int i = 0; i < num_layers; ++i) {
    layer.index = i;
    layer.name = fmt::format("encoder.layer.{}.attention", i);
    desc.layers.push_back(layer);
  }
}

// One stack of an encoder-decoder model, read from its own field names.
struct StackShape {
  int num_layers = 0;
  int num_heads = 0;
  int head_size = 0;
};

void append_stack(ModelDescription& desc, const StackShape& shape, float scale, AttentionType type,
                  std::string_view layer_type, std::string_view name_fmt) {
  LayerSpec layer;
  layer.layer_type = std::string(layer_type);
  layer.attn_type = type;
  layer.num_heads = shape.num_heads;
  layer.num_kv_heads = shape.num_heads;
  layer.head_size = shape.head_size;
  layer.head_size_v = shape.head_size;
  layer.scale = scale;
  for (int i = 0; i < shape.num_layers; ++i) {
    layer.index = static_cast<int>(desc.layers.size());
    layer.name = fmt::format(fmt::runtime(name_fmt), i);
    desc.layers.push_back(layer);
  }
}

// Layers in order: encoder self-attention, decoder self-attention, then cross attention
// (decoder queries over the encoder's K/V), so each kind is one contiguous range.
void build_encoder_decoder(const ConfigReader& cfg, const std::string& model_type,
                           ModelDescription& desc) {
  desc.is_encoder_decoder = true;
  StackShape enc;
  StackShape dec;
  float enc_scale = 1.0f;
  float dec_scale = 1.0f;
  if (is_one_of(model_type, {"t5", "mt5", "umt5"})) {
    // T5 names heads and head size directly and does not scale scores (the 1/sqrt(d) is
    // folded into the weight initialisation).
    enc.num_layers = cfg.layer_count("num_layers");
    dec.num_layers = cfg.opt_layer_count("num_decoder_layers").value_or(enc.num_layers);
    enc.num_heads = dec.num_heads = cfg.positive_int("num_heads", kMaxModelHeads);
    enc.head_size = dec.head_size = cfg.positive_int("d_kv", kMaxModelHeadSize);
    desc.max_encoder_len = cfg.opt_positive_int("n_positions", kMaxModelContext).value_or(512);
  } else {
    enc.num_layers = cfg.layer_count("encoder_layers");
    dec.num_layers = cfg.layer_count("decoder_layers");
    enc.num_heads = cfg.positive_int("encoder_attention_heads", kMaxModelHeads);
    dec.num_heads = cfg.positive_int("decoder_attention_heads", kMaxModelHeads);
    enc.head_size =
        head_size_of(cfg, enc.num_heads, "encoder_head_dim", "d_model", "encoder_attention_heads");
    dec.head_size =
        head_size_of(cfg, dec.num_heads, "decoder_head_dim", "d_model", "decoder_attention_heads");
    enc_scale = inverse_sqrt(enc.head_size);
    dec_scale = inverse_sqrt(dec.head_size);
    // Whisper's encoder reads max_source_positions audio frames; BART-style text
    // encoders max_position_embeddings tokens.
    auto len = cfg.opt_positive_int_any({"max_source_positions", "max_position_embeddings"},
                                        kMaxModelContext);
    if (!len) {
      cfg.fail("max_source_positions",
               "is missing (and so is 'max_position_embeddings'); cross attention is sized by "
               "the encoder's maximum length");
    }
    desc.max_encoder_len = *len;
  }
  append_stack(desc, enc, enc_scale, AttentionType::kEncoder, "encoder_attention",
               "encoder.layers.{}.self_attn");
  append_stack(desc, dec, dec_scale, AttentionType::kDecoder, "full_attention",
               "decoder.layers.{}.self_attn");
  append_stack(desc, dec, dec_scale, AttentionType::kEncoderDecoder, "cross_attention",
               "decoder.layers.{}.encoder_attn");
}

}  // namespace

nlohmann::json family_defaults(const std::string& model_type) {
  if (model_type == "gemma3_text" || model_type == "gemma3") {
    // Gemma3TextConfig's defaults; multimodal Gemma-3 configs omit these in text_config.
    return {{"num_attention_heads", 8}, {"num_key_value_heads", 4},
            {"head_dim", 256},          {"query_pre_attn_scalar", 256},
            {"sliding_window", 4096},   {"sliding_window_pattern", 6},
            {"num_hidden_layers", 26}};
  }
  return nlohmann::json::object();
}

void build_layers(const ConfigReader& cfg, const std::string& model_type, ModelDescription& desc) {
  if (is_one_of(model_type, {"bert", "roberta", "xlm-roberta"})) {
    build_encoder_only(cfg, desc);
    return;
  }
  if (is_one_of(model_type, {"whisper", "bart", "mbart", "t5", "mt5", "umt5"})) {
    build_encoder_decoder(cfg, model_type, desc);
    return;
  }
  if (const DecoderFamily* family = find_decoder_family(model_type)) {
    build_decoder(cfg, *family, desc);
    return;
  }
  if (is_hybrid_family(model_type)) {
    build_hybrid(cfg, model_type, desc);
    return;
  }

  // Unknown: an encoder-decoder in BART's spelling, or else a plain decoder. Sliding
  // windows apply to every layer when set (Mistral's rule), unless layer_types says more.
  const std::string shown = model_type.empty() ? "(none)" : model_type;
  if (cfg.opt_bool("is_encoder_decoder").value_or(false) && cfg.has("encoder_layers")) {
    desc.warnings.push_back(
        fmt::format("model_type '{}' is not one attnkit knows; read as an encoder-decoder model "
                    "(encoder_layers/decoder_layers)",
                    shown));
    build_encoder_decoder(cfg, model_type, desc);
    return;
  }
  if (has_mla_fields(cfg)) {
    // vLLM recognises MLA by these fields, not by the model type.
    desc.warnings.push_back(
        fmt::format("model_type '{}' is not one attnkit knows; read as multi-head latent "
                    "attention (DeepSeek-V2/V3 layout) from kv_lora_rank and qk_rope_head_dim",
                    shown));
    static constexpr DecoderFamily kLatent{"", Pattern::kMla};
    build_decoder(cfg, kLatent, desc);
    return;
  }
  if (!cfg.has("num_attention_heads")) {
    throw Error(ErrorCode::kInvalidArgument,
                fmt::format("Cannot read model config '{}': model_type '{}' is not one attnkit "
                            "knows, and it has none of the attention fields attnkit reads an "
                            "unknown model by: num_attention_heads (plain decoder, with "
                            "num_hidden_layers, num_key_value_heads, head_dim or hidden_size), "
                            "kv_lora_rank + qk_rope_head_dim (multi-head latent attention), or "
                            "is_encoder_decoder + encoder_layers (encoder-decoder)",
                            cfg.source(), shown));
  }
  desc.warnings.push_back(fmt::format(
      "model_type '{}' is not one attnkit knows; read as a plain decoder from "
      "num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim/hidden_size, "
      "sliding_window and layer_types",
      shown));
  static constexpr DecoderFamily kPlain{"", Pattern::kAllSliding};
  try {
    build_decoder(cfg, kPlain, desc);
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{} (model_type '{}' is not one attnkit knows, so it is "
                                      "read as a plain decoder, which needs that field)",
                                      e.what(), shown));
  }
}

}  // namespace attnkit::model_detail
