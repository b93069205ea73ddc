// explain() over the embedded models with small test backends: per-layer choices, who chose
// them, rejected candidates with reasons, KV-cache groups, described platforms, errors, and
// the text and JSON renderings.

#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>

#include "attnkit/core/error.h"
#include "attnkit/core/json_schema.h"
#include "attnkit/explain/explain.h"
#include "attnkit/kernels/cpu_isa.h"
#include "explain_test_util.h"

namespace attnkit {
namespace {

using testing::described_cuda;
using testing::register_explain_backends;
using testing::test_cpu;

class Explain : public ::testing::Test {
 protected:
  Explain() : registry_(BackendRegistry::Contents::kEmpty) { register_explain_backends(registry_); }

  Explanation run(const std::string& model, const std::string& attention_json = "",
                  Platform platform = test_cpu(), std::optional<int> block_size = {}) {
    ExplainRequest request;
    request.platform = platform;
    request.block_size = block_size;
    if (!attention_json.empty()) {
      request.attention = parse_attention_config(attention_json, registry_);
    }
    return explain(load_model(model), request, registry_);
  }

  std::string error_of(const std::string& model, const std::string& attention_json,
                       Platform platform = test_cpu()) {
    try {
      run(model, attention_json, platform);
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "expected an Error";
    return "";
  }

  BackendRegistry registry_;
};

std::vector<int> layers_with(const Explanation& e, const std::string& backend, ChosenBy by) {
  std::vector<int> out;
  for (const LayerOutcome& o : e.layers) {
    if (o.selection && o.selection->backend == backend && o.selection->chosen_by == by) {
      out.push_back(o.layer.index);
    }
  }
  return out;
}

const std::vector<int> kGemmaFull = {5, 11, 17, 23};
const std::vector<int> kGemmaSliding = {0,  1,  2,  3,  4,  6,  7,  8,  9,  10, 12,
                                        13, 14, 15, 16, 18, 19, 20, 21, 22, 24, 25};

TEST_F(Explain, Gemma3AutomaticSelectionPicksTheFirstValidBackendEverywhere) {
  const Explanation e = run("gemma-3-1b-it");
  ASSERT_EQ(e.layers.size(), 26u);
  EXPECT_EQ(e.dtype, DType::kBFloat16);  // the model's torch_dtype
  EXPECT_TRUE(e.runnable);
  EXPECT_EQ(layers_with(e, "CPU_FLASH", ChosenBy::kAuto).size(), 26u);
  for (const LayerOutcome& o : e.layers) {
    // REFERENCE is valid too, but lower in the CPU priority list: nothing is rejected.
    ASSERT_EQ(o.selection->candidates.size(), 2u);
    EXPECT_TRUE(o.selection->candidates[1].valid());
  }
  // Two distinct configurations (sliding, full) share two selection results.
  EXPECT_EQ(e.layers[0].selection, e.layers[24].selection);
  EXPECT_EQ(e.layers[5].selection, e.layers[23].selection);
  EXPECT_NE(e.layers[0].selection, e.layers[5].selection);
}

TEST_F(Explain, ShowsTheKernelVariantOfEveryChosenBackendAndTheOptions) {
  const Explanation e = run("gemma-3-1b-it");
  ASSERT_EQ(e.kernel_variants.count("CPU_FLASH"), 1u);
  EXPECT_EQ(e.kernel_variants.at("CPU_FLASH").rfind("cpu isa ", 0), 0u);
  // The bf16 dot products are named exactly where the kernels take them.
  const bool dot = cpu::active_cpu_isa() == cpu::CpuIsa::kAvx512 && cpu::avx512_bf16_dot_enabled();
  EXPECT_EQ(e.kernel_variants.at("CPU_FLASH").find("bf16 dot products") != std::string::npos, dot)
      << e.kernel_variants.at("CPU_FLASH");
  const std::string text = to_text(e);
  EXPECT_NE(text.find("Kernels of CPU_FLASH: cpu isa "), std::string::npos) << text;
  EXPECT_NE(text.find("Options: "), std::string::npos) << text;
  const nlohmann::json j = to_json(e);
  EXPECT_EQ(j["kernel_variants"]["CPU_FLASH"], e.kernel_variants.at("CPU_FLASH"));
  EXPECT_TRUE(j["options"].is_object());
  EXPECT_EQ(kernel_variant("REFERENCE", test_cpu()), "");
  EXPECT_EQ(kernel_variant("CUDA_PAGED", described_cuda(8, 0)), "dependent launches off");
  EXPECT_EQ(kernel_variant("CUDA_MLA", described_cuda(8, 0)),
            "sm_80 large-row tiles, dependent launches off");
  ASSERT_EQ(unsetenv("ATTNKIT_CUDA_MLA_SM90_TILES"), 0);
  EXPECT_EQ(kernel_variant("CUDA_MLA", described_cuda(9, 0)).rfind("sm_90 large-row tiles, ", 0),
            0u);
  ASSERT_EQ(setenv("ATTNKIT_CUDA_MLA_SM90_TILES", "0", 1), 0);
  EXPECT_EQ(kernel_variant("CUDA_MLA", described_cuda(9, 0)).rfind("sm_80 large-row tiles, ", 0),
            0u);
  ASSERT_EQ(unsetenv("ATTNKIT_CUDA_MLA_SM90_TILES"), 0);
}

TEST_F(Explain, Gemma3PerKindChoiceSendsSlidingLayersToReference) {
  const Explanation e =
      run("gemma-3-1b-it", R"({"backend_per_kind": {"sliding_window": "REFERENCE"}})");
  EXPECT_EQ(layers_with(e, "REFERENCE", ChosenBy::kPerKind), kGemmaSliding);
  EXPECT_EQ(layers_with(e, "CPU_FLASH", ChosenBy::kAuto), kGemmaFull);
  // The swapped mapping swaps them.
  const Explanation s =
      run("gemma-3-1b-it", R"({"backend_per_kind": {"full_attention": "REFERENCE"}})");
  EXPECT_EQ(layers_with(s, "REFERENCE", ChosenBy::kPerKind), kGemmaFull);
  EXPECT_EQ(layers_with(s, "CPU_FLASH", ChosenBy::kAuto), kGemmaSliding);
}

TEST_F(Explain, Gemma3KvCacheGroupsFollowTheChoices) {
  const Explanation e =
      run("gemma-3-1b-it", R"({"backend_per_kind": {"sliding_window": "REFERENCE"}})");
  // Page of one layer: 16 tokens x 1 KV head x (256 + 256) x 2 bytes = 16384.
  EXPECT_EQ(e.kv_cache.page_size_bytes, 16384u);
  // Hybrid grouping splits the buckets (22 sliding, 4 full) into groups of the smallest
  // bucket's size, 4: ceil(22 / 4) = 6 sliding groups and 1 full group.
  ASSERT_EQ(e.kv_cache.groups.size(), 7u);
  EXPECT_EQ(e.kv_cache.num_buffers, 4);
  std::set<int> seen;
  size_t sliding_layers = 0;
  for (const KvCacheGroup& g : e.kv_cache.groups) {
    EXPECT_EQ(g.cache_block_size(), 16);
    EXPECT_EQ(g.spec.page_size_bytes(), 16384u);
    EXPECT_EQ(g.bytes_per_token(), g.layer_indices.size() * 1024u);  // 1 x 512 x 2 per layer
    const bool sliding = g.spec.kind == KvCacheKind::kSlidingWindow;
    EXPECT_EQ(g.backend_names(), std::vector<std::string>{sliding ? "REFERENCE" : "CPU_FLASH"});
    if (sliding) {
      EXPECT_EQ(g.spec.sliding_window, 512);
      sliding_layers += g.layer_indices.size();
    } else {
      EXPECT_EQ(g.layer_indices, kGemmaFull);
    }
    for (int i : g.layer_indices) {
      EXPECT_TRUE(seen.insert(i).second) << "layer " << i << " in two groups";
      EXPECT_EQ(e.layers[static_cast<size_t>(i)].kv_cache_group, g.group_id);
    }
  }
  EXPECT_EQ(sliding_layers, 22u);
  EXPECT_EQ(seen.size(), 26u);
}

TEST_F(Explain, RejectedCandidatesCarryTheirReasons) {
  // gpt-oss has sinks on every layer; the test CPU_FLASH has none.
  const Explanation e = run("gpt-oss-20b");
  for (const LayerOutcome& o : e.layers) {
    EXPECT_EQ(o.selection->backend, "REFERENCE");
    ASSERT_EQ(o.selection->candidates.size(), 2u);
    const CandidateReport& flash = o.selection->candidates[0];
    EXPECT_EQ(flash.backend, "CPU_FLASH");
    EXPECT_FALSE(flash.valid());
  }
  const nlohmann::json j = to_json(e);
  const auto& rejected = j["layers"][1]["rejected"];
  ASSERT_TRUE(rejected.contains("CPU_FLASH"));
  bool mentions_sinks = false;
  for (const auto& reason : rejected["CPU_FLASH"]) {
    mentions_sinks |= reason.get<std::string>().find("sink") != std::string::npos;
  }
  EXPECT_TRUE(mentions_sinks) << rejected.dump();
  EXPECT_FALSE(j["layers"][1]["rejected"].contains("REFERENCE"));
}

TEST_F(Explain, MlaEncoderAndCrossLayersGoWhereTheyCan) {
  const Explanation ds = run("deepseek-v2-lite");
  EXPECT_EQ(layers_with(ds, "REFERENCE", ChosenBy::kAuto).size(), 27u);  // MLA
  ASSERT_EQ(ds.kv_cache.groups.size(), 1u);
  // One latent vector of 512 + 64 elements per token and layer, bf16.
  EXPECT_EQ(ds.kv_cache.groups[0].bytes_per_token(), 27u * 576u * 2u);

  const Explanation w = run("whisper-tiny");
  // A float32 checkpoint runs in bfloat16 (vLLM's auto dtype), and explain says so.
  EXPECT_EQ(w.dtype, DType::kBFloat16);
  ASSERT_FALSE(w.notes.empty());
  EXPECT_NE(w.notes[0].find("the checkpoint is float32; it runs in bfloat16"), std::string::npos);
  // The decoder's self-attention suits CPU_FLASH; encoder and cross attention do not.
  EXPECT_EQ(layers_with(w, "CPU_FLASH", ChosenBy::kAuto), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(layers_with(w, "REFERENCE", ChosenBy::kAuto),
            (std::vector<int>{0, 1, 2, 3, 8, 9, 10, 11}));
  size_t encoder_bytes = 1;
  for (const KvCacheGroup& g : w.kv_cache.groups) {
    if (g.spec.kind == KvCacheKind::kEncoderOnlyAttention) encoder_bytes = g.bytes_per_token();
  }
  EXPECT_EQ(encoder_bytes, 0u);  // encoder self-attention keeps no cache
}

TEST_F(Explain, StateLayersGetAStateBackendAndMlpLayersNone) {
  ExplainRequest request;
  request.platform = test_cpu();
  // Nemotron-H's pattern: M = Mamba2, - = MLP, * = attention.
  const ModelDescription m = parse_model_config_text(R"({
      "model_type": "nemotron_h", "hybrid_override_pattern": "M-M*", "hidden_size": 256,
      "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
      "mamba_num_heads": 8, "mamba_head_dim": 32, "n_groups": 2, "ssm_state_size": 16,
      "conv_kernel": 4})",
                                                     "hybrid", "hybrid.json");
  const BackendRegistry builtins;  // the real state backends
  const Explanation e = explain(m, request, builtins);
  ASSERT_EQ(e.layers.size(), 4u);
  EXPECT_EQ(e.layers[0].selection->backend, "MAMBA2");
  EXPECT_EQ(e.layers[1].selection, nullptr);
  EXPECT_EQ(e.layers[1].kv_cache_group, -1);
  EXPECT_EQ(e.layers[3].selection->backend, "CPU_FLASH");
  const std::string text = to_text(e);
  EXPECT_NE(text.find("Layers (4, of which 1 attention and 2 state):"), std::string::npos) << text;
  // conv over 8 x 32 + 2 x 2 x 16 = 320 channels x 3 inputs (3840 B), state 8 x 32 x 16
  // (16384 B), float32: 20224 B
  EXPECT_NE(text.find("layers 0, 2: mamba(mamba2)   8x32 heads, 2 groups, state 16, conv 4; "
                      "20224 B state per request  -> MAMBA2 (auto)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("layer 1:     mlp: no attention backend needed"), std::string::npos) << text;
  EXPECT_NE(text.find("State bytes per request over all layers: 40448"), std::string::npos) << text;
  const nlohmann::json j = to_json(e);
  EXPECT_EQ(j["layers"][1]["note"], "no attention backend needed");
  EXPECT_TRUE(j["layers"][1]["backend"].is_null());
  EXPECT_TRUE(j["layers"][1]["kind"].is_null());
  EXPECT_EQ(j["layers"][0]["kind"], "mamba");
  EXPECT_EQ(j["layers"][0]["backend"], "MAMBA2");
  EXPECT_EQ(j["layers"][0]["state"]["type"], "mamba2");
  EXPECT_EQ(j["layers"][0]["state"]["conv_state_shape"], (std::vector<int>{320, 3}));
  EXPECT_EQ(j["layers"][0]["state"]["recurrent_state_shape"], (std::vector<int>{8, 32, 16}));
  EXPECT_EQ(j["layers"][0]["state"]["bytes_per_request"], 20224);
  EXPECT_EQ(j["state_bytes_per_request"], 40448);
  EXPECT_TRUE(j["warnings"].empty());
}

TEST_F(Explain, ABackendPerKindKeyThatMatchesNoLayerIsAWarningInTextAndJson) {
  const Explanation e =
      run("llama-3.1-8b-instruct", R"({"backend_per_kind": {"sliding_window": "REFERENCE"}})");
  ASSERT_EQ(e.warnings.size(), 1u);
  EXPECT_EQ(e.warnings[0],
            "backend_per_kind: 'sliding_window' (-> REFERENCE) matches no layer of this model, "
            "so it has no effect; the model's kinds are: full_attention");
  EXPECT_NE(to_text(e).find("Warning: backend_per_kind: 'sliding_window'"), std::string::npos);
  EXPECT_EQ(to_json(e)["warnings"][0], e.warnings[0]);
  // gpt-oss's full layers are full_attention: a vLLM-style per-kind choice reaches them.
  const Explanation gpt =
      run("gpt-oss-20b", R"({"backend_per_kind": {"full_attention": "REFERENCE"}})");
  EXPECT_TRUE(gpt.warnings.empty());
  EXPECT_EQ(layers_with(gpt, "REFERENCE", ChosenBy::kPerKind).size(), 12u);
}

TEST_F(Explain, StrictChoiceThatCannotServeIsAnErrorNamingTheLayer) {
  const std::string m = error_of("gpt-oss-20b", R"({"backend": "CPU_FLASH"})");
  EXPECT_EQ(m.rfind("Layer 0 (layers.0.self_attn, sliding_window(128)): Backend CPU_FLASH", 0), 0u)
      << m;
  EXPECT_NE(m.find("cannot serve"), std::string::npos) << m;
  EXPECT_NE(m.find("override_mode"), std::string::npos) << m;
}

TEST_F(Explain, PreferModeFallsBackWithAWarning) {
  const Explanation e =
      run("gpt-oss-20b", R"({"backend": "CPU_FLASH", "override_mode": "prefer"})");
  EXPECT_EQ(layers_with(e, "REFERENCE", ChosenBy::kAuto).size(), 24u);
  ASSERT_FALSE(e.warnings.empty());
  EXPECT_NE(e.warnings[0].find("CPU_FLASH"), std::string::npos);
  EXPECT_EQ(e.layers[0].selection->requested, "CPU_FLASH");
}

TEST_F(Explain, DescribedPlatformExplainsTheMatchAndSaysTheBinaryCannotRunIt) {
  const Explanation e = run("llama-3.1-8b-instruct", "", described_cuda(9, 0));
  EXPECT_EQ(layers_with(e, "CUDA_FLASH", ChosenBy::kAuto).size(), 32u);
  EXPECT_FALSE(e.runnable);
  ASSERT_EQ(e.notes.size(), 1u);
  EXPECT_EQ(e.notes[0], "CUDA_FLASH on cuda:9.0: CUDA kernels are not built into this binary");
  const std::string text = to_text(e);
  EXPECT_NE(text.find("Note: this binary cannot run this selection on cuda:9.0 here"),
            std::string::npos)
      << text;
  const nlohmann::json j = to_json(e);
  EXPECT_EQ(j["runnable"], false);
  EXPECT_EQ(j["platform"], "cuda:9.0");
  EXPECT_EQ(j["platform_is_local"], false);
}

TEST_F(Explain, UserBlockSizeReachesTheGroups) {
  const Explanation e = run("llama-3.1-8b-instruct", "", test_cpu(), 16);
  ASSERT_EQ(e.kv_cache.groups.size(), 1u);
  EXPECT_EQ(e.kv_cache.groups[0].cache_block_size(), 16);
  EXPECT_TRUE(e.kv_cache.groups[0].user_block_size);
  // 16 x 8 KV heads x (128 + 128) x 2 bytes.
  EXPECT_EQ(e.kv_cache.page_size_bytes, 65536u);
  EXPECT_EQ(to_json(e)["block_size"], 16);
}

TEST_F(Explain, TextShowsWhatAnAutoKvCacheDtypeResolvedTo) {
  const Explanation e = run("gemma-3-1b-it");
  EXPECT_EQ(e.kv_cache_dtype, KvCacheDType::kAuto);
  EXPECT_EQ(e.resolved_kv_cache_dtype(), resolve_kv_cache_dtype(KvCacheDType::kAuto, e.dtype));
  const std::string text = to_text(e);
  EXPECT_NE(text.find("KV cache dtype auto (= " + std::string(to_string(e.dtype)) + ")"),
            std::string::npos)
      << text;
}

TEST_F(Explain, TextGroupsLayersWithIdenticalOutcome) {
  const std::string text =
      to_text(run("gemma-3-1b-it", R"({"backend_per_kind": {"sliding_window": "REFERENCE"}})"));
  EXPECT_NE(text.find("Model: gemma-3-1b-it (gemma3_text, Gemma3ForCausalLM), from "
                      "embedded:gemma-3-1b-it"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("layers 0-4, 6-10, 12-16, 18-22, 24-25:"), std::string::npos) << text;
  EXPECT_NE(text.find("sliding_window(512)"), std::string::npos);
  EXPECT_NE(text.find("-> REFERENCE (per_kind)"), std::string::npos);
  EXPECT_NE(text.find("layers 5, 11, 17, 23:"), std::string::npos);
  EXPECT_NE(text.find("-> CPU_FLASH (auto)"), std::string::npos);
  EXPECT_NE(text.find("backend_per_kind: sliding_window -> REFERENCE"), std::string::npos);
  EXPECT_NE(text.find("KV-cache groups (7 groups; one block pool, page 16384 bytes per layer"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("KV bytes per token over all layers: 26624"),
            std::string::npos);  // 26 x 1024
  EXPECT_NE(text.find("Backend choice per distinct configuration (2):"), std::string::npos);
}

TEST_F(Explain, JsonHasTheStableSchema) {
  const nlohmann::json j =
      to_json(run("gemma-3-1b-it", R"({"backend_per_kind": {"sliding_window": "REFERENCE"}})"));
  for (const char* key :
       {"model",           "model_type",        "architecture", "source",
        "platform",        "platform_is_local", "runnable",     "notes",
        "dtype",           "kv_cache_dtype",    "block_size",   "attention_config",
        "warnings",        "kernel_variants",   "options",      "layers",
        "kv_cache_groups", "page_size_bytes",   "num_buffers",  "kv_bytes_per_token",
        "cuda_graphs"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j.value("schema_version", -1), kJsonSchemaVersion);
  EXPECT_TRUE(j.contains("resolved_kv_cache_dtype"));
  EXPECT_TRUE(j.contains("state_bytes_per_request"));
  // the 21 above, resolved_kv_cache_dtype, state_bytes_per_request and schema_version
  EXPECT_EQ(j.size(), 24u);
  EXPECT_EQ(j["cuda_graphs"]["CPU_FLASH"], "never");
  // The request said "auto"; the layers carry what it resolved to, the compute dtype.
  EXPECT_EQ(j["kv_cache_dtype"], "auto");
  EXPECT_EQ(j["resolved_kv_cache_dtype"], j["dtype"]);
  EXPECT_EQ(j["model"], "gemma-3-1b-it");
  EXPECT_EQ(j["platform"], "cpu");
  EXPECT_TRUE(j["block_size"].is_null());
  EXPECT_EQ(j["kv_bytes_per_token"], 26624);
  ASSERT_EQ(j["layers"].size(), 26u);
  const auto& l0 = j["layers"][0];
  const std::set<std::string> layer_keys = {
      "index",      "name",         "layer_type", "is_attention",   "kind",  "attn_type",
      "num_heads",  "num_kv_heads", "head_size",  "head_size_v",    "scale", "sliding_window",
      "chunk_size", "soft_cap",     "sinks",      "uses_rope",      "mla",   "backend",
      "chosen_by",  "requested",    "rejected",   "kv_cache_group", "note",  "state",
      "phases",     "priority",     "tuning",     "phase_tuning"};
  std::set<std::string> keys;
  for (const auto& [k, v] : l0.items()) keys.insert(k);
  EXPECT_EQ(keys, layer_keys);
  EXPECT_EQ(l0["index"], 0);
  EXPECT_EQ(l0["kind"], "sliding_window");
  EXPECT_EQ(l0["attn_type"], "decoder");
  EXPECT_EQ(l0["num_heads"], 4);
  EXPECT_EQ(l0["num_kv_heads"], 1);
  EXPECT_EQ(l0["head_size"], 256);
  EXPECT_EQ(l0["sliding_window"], 512);
  EXPECT_TRUE(l0["chunk_size"].is_null());
  EXPECT_TRUE(l0["mla"].is_null());
  EXPECT_EQ(l0["backend"], "REFERENCE");
  EXPECT_EQ(l0["chosen_by"], "per_kind");
  EXPECT_TRUE(l0["rejected"].is_object());
  EXPECT_TRUE(l0["rejected"].empty());
  const auto& l5 = j["layers"][5];
  EXPECT_EQ(l5["kind"], "full_attention");
  EXPECT_TRUE(l5["sliding_window"].is_null());
  EXPECT_EQ(l5["backend"], "CPU_FLASH");
  EXPECT_EQ(l5["chosen_by"], "auto");

  ASSERT_EQ(j["kv_cache_groups"].size(), 7u);
  for (const auto& g : j["kv_cache_groups"]) {
    for (const char* key :
         {"id", "kind", "spec", "cache_spec", "layers", "backend", "backends", "block_size",
          "kernel_block_size", "layout", "page_size_bytes", "kv_bytes_per_token", "has_cache"}) {
      EXPECT_TRUE(g.contains(key)) << key;
    }
    EXPECT_EQ(g["page_size_bytes"], 16384);
    EXPECT_EQ(g["block_size"], 16);
    EXPECT_EQ(g["layout"], "NHD");
    EXPECT_EQ(g["backend"], g["kind"] == "sliding_window" ? "REFERENCE" : "CPU_FLASH");
    EXPECT_EQ(g["kv_bytes_per_token"], 1024 * g["layers"].size());
    // The spec as data: one KV head of 256, K and V, bf16, per layer.
    const auto& spec = g["cache_spec"];
    EXPECT_EQ(spec["kind"], g["kind"]);
    EXPECT_EQ(spec["block_size"], 16);
    EXPECT_EQ(spec["num_kv_heads"], 1);
    EXPECT_EQ(spec["head_size"], 256);
    EXPECT_EQ(spec["head_size_v"], 256);
    EXPECT_EQ(spec["dtype"], "bfloat16");
    EXPECT_EQ(spec["bytes_per_token"], 1024);
    EXPECT_TRUE(spec["chunk_size"].is_null());
    EXPECT_TRUE(spec["max_encoder_len"].is_null());
    if (g["kind"] == "sliding_window") {
      EXPECT_EQ(spec["sliding_window"], 512);
    } else {
      EXPECT_TRUE(spec["sliding_window"].is_null());
    }
  }
}

TEST(FormatLayerList, RangesAndRegularPatterns) {
  EXPECT_EQ(format_layer_list({}), "");
  EXPECT_EQ(format_layer_list({3}), "3");
  EXPECT_EQ(format_layer_list({0, 1, 2, 3, 4, 6, 7, 9}), "0-4, 6-7, 9");
  EXPECT_EQ(format_layer_list({5, 11, 17, 23}), "5, 11, 17, 23");
  EXPECT_EQ(format_layer_list({0, 1, 2, 3, 4}), "0-4");
  // Five runs stay in full (Gemma-3-1B's sliding layers).
  EXPECT_EQ(format_layer_list(
                {0, 1, 2, 3, 4, 6, 7, 8, 9, 10, 12, 13, 14, 15, 16, 18, 19, 20, 21, 22, 24, 25}),
            "0-4, 6-10, 12-16, 18-22, 24-25");
  EXPECT_EQ(format_layer_list({0, 2, 4, 6, 8, 10}), "0, 2, ..., 10");
  std::vector<int> rope;
  for (int i = 0; i < 48; ++i) {
    if ((i + 1) % 4 != 0) rope.push_back(i);
  }
  EXPECT_EQ(format_layer_list(rope), "0-2, 4-6, ..., 44-46");
  // The last run may be cut short by the end of the model.
  EXPECT_EQ(format_layer_list({0, 1, 3, 4, 6, 7, 9, 10, 12, 13, 15}), "0-1, 3-4, ..., 15");
  // Irregular spacing is never elided.
  EXPECT_EQ(format_layer_list({0, 2, 4, 6, 8, 11}), "0, 2, 4, 6, 8, 11");
  EXPECT_EQ(format_layer_list({0, 1, 3, 4, 6, 7, 9, 10, 12, 13, 15, 16, 17}),
            "0-1, 3-4, 6-7, 9-10, 12-13, 15-17");
}

}  // namespace
}  // namespace attnkit
