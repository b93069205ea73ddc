// `attnkit explain` end to end: the built binary with its real built-in backends. Per-kind
// selection, text and JSON output for every embedded model, and every user error path with
// its exit status and message.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "attnkit/build_config.h"
#include "attnkit/model/model_loader.h"
#include "cli_runner.h"

namespace attnkit {
namespace {

using testing::run_cli;

nlohmann::json explain_json(std::vector<std::string> args, std::vector<std::string> env = {}) {
  args.insert(args.begin(), "explain");
  args.push_back("--json");
  const testing::CliResult r = run_cli(args, env);
  EXPECT_EQ(r.status, 0) << r.err;
  try {
    return nlohmann::json::parse(r.out);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "not JSON: " << e.what() << "\n" << r.out;
    return {};
  }
}

// Runs a command expected to fail: non-zero exit, nothing on stdout, and the message on
// stderr after "attnkit: error: ".
std::string failure(std::vector<std::string> args, std::vector<std::string> env = {}) {
  args.insert(args.begin(), "explain");
  const testing::CliResult r = run_cli(args, env);
  EXPECT_NE(r.status, 0) << r.out;
  EXPECT_EQ(r.out, "");
  return r.err;
}

void expect_error(const std::string& err, const std::string& message) {
  EXPECT_NE(err.find("attnkit: error: "), std::string::npos) << err;
  EXPECT_NE(err.find(message), std::string::npos) << "expected: " << message << "\ngot: " << err;
}

const std::set<int> kGemmaFull = {5, 11, 17, 23};

TEST(ExplainCli, PerKindSelectionSendsEachKindWhereTheConfigSays) {
  const nlohmann::json automatic = explain_json({"--model", "gemma-3-1b-it", "--platform", "cpu"});
  ASSERT_EQ(automatic["layers"].size(), 26u);
  const std::string auto_full = automatic["layers"][5]["backend"];
  const std::string auto_sliding = automatic["layers"][0]["backend"];

  const nlohmann::json per_kind =
      explain_json({"--model", "gemma-3-1b-it", "--platform", "cpu", "--attention-config",
                    R"({"backend_per_kind": {"sliding_window": "REFERENCE"}})"});
  const nlohmann::json swapped =
      explain_json({"--model", "gemma-3-1b-it", "--platform", "cpu", "--attention-config",
                    R"({"backend_per_kind": {"full_attention": "REFERENCE"}})"});
  for (int i = 0; i < 26; ++i) {
    const bool full = kGemmaFull.count(i) > 0;
    const auto& a = per_kind["layers"][static_cast<size_t>(i)];
    const auto& b = swapped["layers"][static_cast<size_t>(i)];
    EXPECT_EQ(a["kind"], full ? "full_attention" : "sliding_window");
    EXPECT_EQ(a["backend"], full ? auto_full : "REFERENCE") << i;
    EXPECT_EQ(a["chosen_by"], full ? "auto" : "per_kind") << i;
    EXPECT_EQ(b["backend"], full ? "REFERENCE" : auto_sliding) << i;
    EXPECT_EQ(b["chosen_by"], full ? "per_kind" : "auto") << i;
  }
}

TEST(ExplainCli, TextOutputGroupsLayersAndListsKvGroupsAndReasons) {
  const testing::CliResult r =
      run_cli({"explain", "--model", "gemma-3-1b-it", "--platform", "cpu", "--attention-config",
               R"({"backend_per_kind": {"sliding_window": "REFERENCE"}})"});
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("layers 0-4, 6-10, 12-16, 18-22, 24-25: sliding_window(512)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("-> REFERENCE (per_kind)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("layers 5, 11, 17, 23:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("KV-cache groups ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("page bytes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("KV bytes per token over all layers: 26624"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Backend choice per distinct configuration (2):"), std::string::npos);
}

TEST(ExplainCli, JsonDescribesEveryEmbeddedModel) {
  for (const std::string& name : embedded_model_names()) {
    const ModelDescription m = load_model(name);
    const nlohmann::json j = explain_json({"--model", name, "--platform", "cpu"});
    EXPECT_EQ(j["model"], name);
    EXPECT_EQ(j["platform"], "cpu");
    EXPECT_EQ(j["runnable"], true) << name;
    ASSERT_EQ(j["layers"].size(), m.layers.size()) << name;
    std::set<int> grouped;
    for (const auto& g : j["kv_cache_groups"]) {
      for (int i : g["layers"]) EXPECT_TRUE(grouped.insert(i).second) << name << " layer " << i;
      if (g["kind"] == "mamba") {
        // A state group: one padded page per request, no per-token K/V.
        EXPECT_EQ(g["page_size_bytes"], j["page_size_bytes"]) << name;
        EXPECT_EQ(g["kv_bytes_per_token"], 0) << name;
        EXPECT_GT(g["state_bytes_per_request"].get<long>(), 0) << name;
      } else if (g["has_cache"]) {
        EXPECT_EQ(g["page_size_bytes"], j["page_size_bytes"]) << name;
        EXPECT_GT(g["kv_bytes_per_token"].get<int>(), 0) << name;
      } else {
        EXPECT_EQ(g["kind"], "encoder_only_attention") << name;
        EXPECT_EQ(g["kv_bytes_per_token"], 0) << name;
      }
    }
    for (size_t i = 0; i < m.layers.size(); ++i) {
      const auto& l = j["layers"][i];
      const LayerSpec& s = m.layers[i];
      EXPECT_EQ(l["index"], s.index);
      if (!s.needs_backend()) {  // an MLP block a hybrid config lists as a layer
        EXPECT_TRUE(l["backend"].is_null()) << name << " layer " << i;
        continue;
      }
      EXPECT_EQ(l["kind"], to_string(s.kind)) << name << " layer " << i;
      if (s.state) {
        EXPECT_EQ(l["state"]["type"], to_string(s.state->type)) << name << " layer " << i;
        EXPECT_EQ(l["state"]["bytes_per_request"], s.state->bytes());
        EXPECT_TRUE(l["num_heads"].is_null());
      } else {
        EXPECT_EQ(l["num_heads"], s.num_heads);
        EXPECT_EQ(l["num_kv_heads"], s.num_kv_heads);
        EXPECT_EQ(l["head_size"], s.head_size);
        EXPECT_TRUE(l["state"].is_null());
      }
      EXPECT_EQ(l["sliding_window"].is_null(), !s.sliding_window.has_value());
      EXPECT_TRUE(l["backend"].is_string());
      EXPECT_EQ(l["chosen_by"], "auto");
      EXPECT_TRUE(grouped.count(s.index)) << name << " layer " << i << " in no group";
      EXPECT_EQ(l["kv_cache_group"].is_number(), true);
    }
  }
}

TEST(ExplainCli, ModelFileDtypeAndBlockSizeFlags) {
  const std::string path = std::string(ATTNKIT_MODELS_DIR) + "/llama-3.1-8b-instruct.json";
  const nlohmann::json j = explain_json({"--model", path, "--platform", "cpu", "--dtype", "fp32",
                                         "--kv-cache-dtype", "float32", "--block-size", "32"});
  EXPECT_EQ(j["model"], "llama-3.1-8b-instruct");
  EXPECT_EQ(j["source"], path);
  EXPECT_EQ(j["dtype"], "float32");
  EXPECT_EQ(j["kv_cache_dtype"], "float32");
  EXPECT_EQ(j["block_size"], 32);
  ASSERT_EQ(j["kv_cache_groups"].size(), 1u);
  EXPECT_EQ(j["kv_cache_groups"][0]["block_size"], 32);
  // 32 tokens x 8 KV heads x (128 + 128) x 4 bytes.
  EXPECT_EQ(j["kv_cache_groups"][0]["page_size_bytes"], 262144);
  EXPECT_EQ(j["kv_bytes_per_token"], 32 * 8 * 256 * 4);  // 32 layers
}

TEST(ExplainCli, GlobalChoicesFromFlagConfigFileAndEnvironment) {
  const nlohmann::json flag = explain_json(
      {"--model", "mistral-7b-v0.1", "--platform", "cpu", "--attention-backend", "reference"});
  EXPECT_EQ(flag["layers"][0]["backend"], "REFERENCE");
  EXPECT_EQ(flag["layers"][0]["chosen_by"], "global");
  EXPECT_EQ(flag["attention_config"]["backend"], "REFERENCE");

  const auto file = std::filesystem::temp_directory_path() /
                    ("attnkit_explain_cfg_" + std::to_string(::getpid()).append(".json"));
  std::ofstream(file) << R"({"backend": "REFERENCE"})";
  const nlohmann::json from_file =
      explain_json({"--model", "mistral-7b-v0.1", "--platform", "cpu", "--attention-config",
                    std::string("@").append(file.string())});
  std::filesystem::remove(file);
  EXPECT_EQ(from_file["layers"][31]["chosen_by"], "global");

  const nlohmann::json env = explain_json({"--model", "mistral-7b-v0.1", "--platform", "cpu"},
                                          {"ATTNKIT_ATTENTION_BACKEND=REFERENCE"});
  EXPECT_EQ(env["layers"][0]["backend"], "REFERENCE");
  EXPECT_EQ(env["layers"][0]["chosen_by"], "env");
}

TEST(ExplainCli, DescribedGpuPlatformSaysWhetherThisBinaryCanRunIt) {
  const testing::CliResult listed = run_cli({"backends", "--platform", "cuda:9.0", "--json"});
  ASSERT_EQ(listed.status, 0) << listed.err;
  bool any_cuda_backend = false;
  // Keep the parsed document alive for the loop (a range over a temporary's member dangles).
  const nlohmann::json backends = nlohmann::json::parse(listed.out);
  for (const auto& b : backends["backends"]) {
    any_cuda_backend |= b["capabilities"]["platform"] == "cuda";
  }
  if (!any_cuda_backend) GTEST_SKIP() << "no CUDA backend registered in this binary";
  const testing::CliResult text =
      run_cli({"explain", "--model", "llama-3.1-8b-instruct", "--platform", "cuda:9.0"});
  ASSERT_EQ(text.status, 0) << text.err;
  const nlohmann::json j =
      explain_json({"--model", "llama-3.1-8b-instruct", "--platform", "cuda:9.0"});
  EXPECT_EQ(j["platform"], "cuda:9.0");
  EXPECT_EQ(j["platform_is_local"], false);
  if (!ATTNKIT_HAS_CUDA) {
    EXPECT_EQ(j["runnable"], false);
    EXPECT_FALSE(j["notes"].empty());
    EXPECT_NE(text.out.find("Note: this binary cannot run this selection on cuda:9.0 here"),
              std::string::npos)
        << text.out;
  }
  for (const auto& l : j["layers"]) EXPECT_NE(l["backend"], "REFERENCE");  // CPU only
  // An fp8 cache is served by the tensor-core kernels (converted after each tile load),
  // the first CUDA choice, not by the CUDA-core fallback.
  for (const char* fp8 : {"fp8_e4m3", "fp8_e5m2"}) {
    const nlohmann::json f = explain_json(
        {"--model", "llama-3.1-8b-instruct", "--platform", "cuda:9.0", "--kv-cache-dtype", fp8});
    ASSERT_FALSE(f["layers"].empty());
    for (const auto& l : f["layers"]) EXPECT_EQ(l["backend"], "CUDA_FLASH") << fp8;
  }
}

TEST(ExplainCli, SelectionErrors) {
  const std::vector<std::string> base = {"--model", "gemma-3-1b-it", "--platform", "cpu"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  };
  expect_error(
      failure(with({"--attention-config", R"({"backend_per_kind": {"sliding": "REFERENCE"}})"})),
      "Unknown KV cache group kind 'sliding' in backend_per_kind. Valid kinds are: "
      "chunked_local_attention, cross_attention, encoder_only_attention, full_attention, "
      "mamba, mla_attention, sink_full_attention, sliding_window, sliding_window_mla");
  expect_error(failure(with({"--attention-backend", "NOPE"})),
               "Unknown attention backend: 'NOPE'. Valid options are: ");
  expect_error(failure(with({"--attention-config", R"({"backend": "nope"})"})),
               "Unknown attention backend: 'nope'. Valid options are: ");
  expect_error(failure(with({"--attention-config", R"({"backend": "CUSTOM"})"})),
               "Backend CUSTOM must be registered before use");
  expect_error(failure(with({"--attention-config", R"({"backend": })"})),
               "Attention config is not valid JSON");
  expect_error(failure(with({"--attention-config", R"({"backend": "REFERENCE", "mode": 1})"})),
               "Unknown key 'mode' in attention config");
  expect_error(failure(with({"--attention-config", "/nonexistent/attn.json"})),
               "Attention config file '/nonexistent/attn.json' does not exist");
  // A strict choice that cannot serve the layer: REFERENCE runs on the CPU only.
  expect_error(failure({"--model", "gemma-3-1b-it", "--platform", "cuda:9.0", "--attention-backend",
                        "REFERENCE"}),
               "Layer 0 (layers.0.self_attn, sliding_window(512)): Backend REFERENCE (chosen by "
               "the attention config's 'backend') cannot serve");
}

TEST(ExplainCli, MutuallyExclusiveChoices) {
  const std::vector<std::string> args = {
      "--model", "gemma-3-1b-it",      "--platform",
      "cpu",     "--attention-config", R"({"backend": "REFERENCE"})"};
  expect_error(failure(args, {"ATTNKIT_ATTENTION_BACKEND=REFERENCE"}),
               "ATTNKIT_ATTENTION_BACKEND=REFERENCE and the attention config's 'backend' "
               "(REFERENCE) are mutually exclusive");
  expect_error(failure({"--model", "gemma-3-1b-it", "--attention-backend", "REFERENCE"},
                       {"ATTNKIT_ATTENTION_BACKEND=REFERENCE"}),
               "--attention-backend REFERENCE and ATTNKIT_ATTENTION_BACKEND=REFERENCE are "
               "mutually exclusive");
  std::vector<std::string> both = args;
  both.insert(both.end(), {"--attention-backend", "REFERENCE"});
  expect_error(failure(both),
               "--attention-backend REFERENCE and the attention config's "
               "\"backend\" (REFERENCE) are mutually exclusive");
  expect_error(failure({"--model", "gemma-3-1b-it"}, {"ATTNKIT_ATTENTION_BACKEND=BOGUS"}),
               "Unknown attention backend: 'BOGUS'. Valid options are: ");
}

TEST(ExplainCli, ModelAndFlagErrors) {
  std::string list;
  for (const std::string& n : embedded_model_names()) list += (list.empty() ? "" : ", ") + n;
  expect_error(failure({"--model", "gemma-99b"}),
               "Unknown model 'gemma-99b': no such file, and no embedded model of that name. "
               "Valid embedded models are: " +
                   list);
  expect_error(failure({"--model", "/nonexistent/config.json"}),
               "Model config file '/nonexistent/config.json' does not exist");

  const auto bad = std::filesystem::temp_directory_path() /
                   ("attnkit_explain_bad_" + std::to_string(::getpid()) + ".json");
  std::ofstream(bad) << R"({"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 64})";
  expect_error(failure({"--model", bad.string()}), "Cannot read model config '" + bad.string() +
                                                       "': field 'num_attention_heads' is missing");
  std::ofstream(bad) << "{ not json";
  expect_error(failure({"--model", bad.string()}),
               "Cannot read model config '" + bad.string() + "': invalid JSON");
  std::filesystem::remove(bad);

  expect_error(failure({"--model", "gemma-3-1b-it", "--dtype", "int4"}),
               "Unknown dtype 'int4'. Valid values are: ");
  expect_error(failure({"--model", "gemma-3-1b-it", "--kv-cache-dtype", "fp4"}),
               "Unknown KV cache dtype 'fp4'. Valid values are: ");
  expect_error(failure({"--model", "gemma-3-1b-it", "--platform", "tpu"}),
               "Invalid platform 'tpu'");
  const std::string block_size = failure({"--model", "gemma-3-1b-it", "--block-size", "0"});
  EXPECT_NE(block_size.find("--block-size: Value 0 not in range 1 to 65536"), std::string::npos)
      << block_size;

  const testing::CliResult missing = run_cli({"explain"});
  EXPECT_NE(missing.status, 0);
  EXPECT_NE(missing.err.find("--model is required"), std::string::npos) << missing.err;
}

}  // namespace
}  // namespace attnkit
