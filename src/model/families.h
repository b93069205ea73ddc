#pragma once
// The per-family rules that turn a config.json into layers. Each family follows its
// Hugging Face configuration class: which layers slide, which are chunked, head sizes,
// softmax scale, soft-cap, sinks, MLA and encoder/decoder stacks.

#include <string>

#include "attnkit/model/model_description.h"
#include "model/config_reader.h"

namespace attnkit::model_detail {

// Fills desc.layers (and the family's other fields) from the text model's config `cfg`
// whose model_type is `model_type`. Unknown types with the standard decoder fields are
// read as plain decoders, adding a warning to desc.warnings.
void build_layers(const ConfigReader& cfg, const std::string& model_type, ModelDescription& desc);

// Fields Hugging Face leaves out of a config.json when they equal the configuration
// class's defaults (notably Gemma-3's nested text_config), as a JSON object to merge
// under the config; empty for families whose configs always spell their fields out.
nlohmann::json family_defaults(const std::string& model_type);

// The attention layer every decoder layer of `cfg` starts from: heads, KV heads, head size
// (MLA: the absorbed latent form), softmax scale and soft-cap.
LayerSpec attention_prototype(const ConfigReader& cfg, bool latent);
// The config carries multi-head latent attention's fields (kv_lora_rank, qk_rope_head_dim),
// whatever its model_type says.
bool has_mla_fields(const ConfigReader& cfg);

// Hybrid families (hybrid_families.cpp): attention layers mixed with recurrent-state layers
// of the `mamba` kind, each family's pattern and state sizes read from its own fields.
bool is_hybrid_family(const std::string& model_type);
void build_hybrid(const ConfigReader& cfg, const std::string& model_type, ModelDescription& desc);

}  // namespace attnkit::model_detail
