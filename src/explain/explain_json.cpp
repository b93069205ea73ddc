// The JSON form of an Explanation: docs/schemas/explain.schema.json. Programs depend on it:
// a field removed, renamed or changing type bumps kJsonSchemaVersion (docs/json.md).

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "attnkit/core/json_schema.h"
#include "attnkit/explain/explain.h"
#include "attnkit/selector/selection_report.h"

namespace attnkit {

namespace {

template <typename T>
nlohmann::json or_null(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

// A state layer's sizes as data (core/state_spec.h); null for attention layers.
nlohmann::json state_json(const std::optional<StateLayerDims>& s) {
  if (!s) return nullptr;
  auto positive_or_null = [](int v) { return v > 0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
  return {
      {"type", std::string(to_string(s->type))},
      {"num_heads", positive_or_null(s->num_heads)},
      {"head_dim", positive_or_null(s->head_dim)},
      {"num_k_heads", positive_or_null(s->num_k_heads)},
      {"head_k_dim", positive_or_null(s->head_k_dim)},
      {"state_size", positive_or_null(s->state_size)},
      {"n_groups", positive_or_null(s->n_groups)},
      {"inner_size", positive_or_null(s->inner_size)},
      {"dt_rank", positive_or_null(s->dt_rank)},
      {"conv_kernel", positive_or_null(s->conv_kernel)},
      {"conv_state_shape", s->conv_shape()},
      {"recurrent_state_shape", s->recurrent_shape()},
      {"conv_dtype", std::string(to_string(s->conv_dtype))},
      {"recurrent_dtype", std::string(to_string(s->recurrent_dtype))},
      {"bytes_per_request", s->bytes()},
  };
}

// The selection fields of a layer that has a backend, added to `j`.
nlohmann::json selection_json(const LayerOutcome& o, nlohmann::json& j) {
  const SelectionResult& s = *o.selection;
  j["backend"] = s.backend;
  j["chosen_by"] = to_string(s.chosen_by);
  j["requested"] = s.requested;
  nlohmann::json rejected = nlohmann::json::object();
  for (const CandidateReport& c : s.candidates) {
    if (c.valid()) continue;
    // A backend may be tried for each phase: "NAME (decode)".
    rejected[c.phase ? fmt::format("{} ({})", c.backend, to_string(*c.phase)) : c.backend] =
        c.reasons;
  }
  j["rejected"] = rejected;
  j["tuning"] = s.tuning ? to_json(*s.tuning) : nlohmann::json(nullptr);
  nlohmann::json phase_tuning = nlohmann::json::array();
  for (const TuningReport& t : s.phase_tuning) phase_tuning.push_back(to_json(t));
  j["phase_tuning"] = phase_tuning;
  j["priority"] = s.priority ? to_json(*s.priority) : nlohmann::json(nullptr);
  j["phases"] = s.phases
                    ? nlohmann::json{{"prefill", s.phases->prefill}, {"decode", s.phases->decode}}
                    : nlohmann::json(nullptr);
  j["kv_cache_group"] = o.kv_cache_group >= 0 ? nlohmann::json(o.kv_cache_group) : nullptr;
  j["note"] = nullptr;
  return j;
}

nlohmann::json layer_json(const LayerOutcome& o) {
  const LayerSpec& l = o.layer;
  nlohmann::json j = {
      {"index", l.index},
      {"name", l.name},
      {"layer_type", l.layer_type},
      {"is_attention", l.is_attention},
      {"state", state_json(l.state)},
  };
  if (!l.is_attention) {
    for (const char* key :
         {"kind",     "attn_type",      "num_heads",    "num_kv_heads",  "head_size", "head_size_v",
          "scale",    "sliding_window", "chunk_size",   "soft_cap",      "sinks",     "uses_rope",
          "mla",      "backend",        "chosen_by",    "requested",     "rejected",  "phases",
          "priority", "tuning",         "phase_tuning", "kv_cache_group"}) {
      j[key] = nullptr;
    }
    if (l.state && o.selection) {
      j["kind"] = to_string(l.kind);
      return selection_json(o, j);
    }
    j["note"] = "no attention backend needed";
    return j;
  }
  j["kind"] = to_string(l.kind);
  j["attn_type"] = to_string(l.attn_type);
  j["num_heads"] = l.num_heads;
  j["num_kv_heads"] = l.num_kv_heads;
  j["head_size"] = l.head_size;
  j["head_size_v"] = l.head_size_v;
  j["scale"] = l.scale;
  j["sliding_window"] = or_null(l.sliding_window);
  j["chunk_size"] = or_null(l.chunk_size);
  j["soft_cap"] = or_null(l.soft_cap);
  j["sinks"] = l.has_sinks;
  j["uses_rope"] = l.uses_rope;
  if (l.mla) {
    j["mla"] = {{"kv_lora_rank", l.mla->kv_lora_rank},
                {"qk_rope_head_dim", l.mla->qk_rope_head_dim},
                {"qk_nope_head_dim", l.mla->qk_nope_head_dim},
                {"v_head_dim", l.mla->v_head_dim},
                {"q_lora_rank", or_null(l.mla->q_lora_rank)}};
  } else {
    j["mla"] = nullptr;
  }
  return selection_json(o, j);
}

// The group's KV-cache spec as data ("spec" holds the same as a sentence); sizes that do not
// apply to the kind are null. bytes_per_token is one layer's (the group's is per layer times
// its layers).
nlohmann::json spec_json(const KvCacheSpec& s) {
  auto positive_or_null = [](int v) { return v > 0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
  return {
      {"kind", std::string(to_string(s.kind))},
      {"block_size", s.has_cache() ? nlohmann::json(s.block_size) : nullptr},
      {"num_kv_heads", s.num_kv_heads},
      {"head_size", s.head_size},
      {"head_size_v", positive_or_null(s.head_size_v)},
      {"dtype", std::string(to_string(s.dtype))},
      {"sliding_window", positive_or_null(s.sliding_window)},
      {"chunk_size", positive_or_null(s.chunk_size)},
      {"max_encoder_len", positive_or_null(s.max_encoder_len)},
      {"bytes_per_token", s.bytes_per_token()},
      {"sink_len", positive_or_null(s.sink_len)},
      {"state", state_json(s.state)},
  };
}

// page: the pool's page (a state group's page is its state padded to it).
nlohmann::json group_json(const KvCacheGroup& g, size_t page) {
  const std::vector<std::string> backends = g.backend_names();
  nlohmann::json layouts = nlohmann::json::array();
  for (KvLayout l : g.layer_layouts) {
    if (std::find(layouts.begin(), layouts.end(), to_string(l)) == layouts.end()) {
      layouts.push_back(to_string(l));
    }
  }
  const bool cache = g.has_cache();
  return {
      {"id", g.group_id},
      {"kind", to_string(g.spec.kind)},
      {"spec", g.spec.describe()},
      {"cache_spec", spec_json(g.spec)},
      {"layers", g.layer_indices},
      {"backend", backends.size() == 1 ? nlohmann::json(backends[0]) : nullptr},
      {"backends", backends},
      {"block_size", cache ? nlohmann::json(g.cache_block_size()) : nullptr},
      {"kernel_block_size", cache ? nlohmann::json(g.kernel_block_size) : nullptr},
      {"layout", cache && layouts.size() == 1 ? layouts[0] : nlohmann::json(nullptr)},
      {"page_size_bytes", !cache              ? nlohmann::json(nullptr)
                          : g.spec.is_state() ? nlohmann::json(page)
                                              : nlohmann::json(g.spec.page_size_bytes())},
      {"kv_bytes_per_token", g.bytes_per_token()},
      {"state_bytes_per_request", g.spec.state_bytes() * g.layer_indices.size()},
      {"has_cache", cache},
  };
}

}  // namespace

nlohmann::json to_json(const Explanation& e) {
  nlohmann::json layers = nlohmann::json::array();
  for (const LayerOutcome& o : e.layers) layers.push_back(layer_json(o));
  nlohmann::json groups = nlohmann::json::array();
  size_t per_token = 0;
  size_t per_request = 0;
  for (const KvCacheGroup& g : e.kv_cache.groups) {
    groups.push_back(group_json(g, e.kv_cache.page_size_bytes));
    per_token += g.bytes_per_token();
    per_request += g.spec.state_bytes() * g.layer_indices.size();
  }
  return {
      {"schema_version", kJsonSchemaVersion},
      {"model", e.model.name},
      {"model_type", e.model.model_type},
      {"architecture", e.model.architecture},
      {"source", e.model.source},
      {"platform", e.platform.to_string()},
      {"platform_is_local", e.platform.is_local},
      {"runnable", e.runnable},
      {"notes", e.notes},
      {"dtype", to_string(e.dtype)},
      {"kv_cache_dtype", to_string(e.kv_cache_dtype)},
      {"resolved_kv_cache_dtype", to_string(e.resolved_kv_cache_dtype())},
      {"block_size", or_null(e.block_size)},
      {"attention_config", to_json(e.attention)},
      {"warnings", e.warnings},
      {"kernel_variants", e.kernel_variants},
      {"cuda_graphs", e.cuda_graphs},
      {"options", e.options},
      {"layers", layers},
      {"kv_cache_groups", groups},
      {"page_size_bytes", e.kv_cache.page_size_bytes},
      {"num_buffers", e.kv_cache.num_buffers},
      {"kv_bytes_per_token", per_token},
      {"state_bytes_per_request", per_request},
  };
}

}  // namespace attnkit
