// Every way a config can fail to read: each error names the file (or source) and the
// field, and unknown model names list the embedded ones.

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "attnkit/core/error.h"
#include "model_test_util.h"

namespace attnkit {
namespace {

namespace fs = std::filesystem;

// The message of the Error that `fn` throws (fails the test when it does not throw).
template <typename Fn>
std::pair<ErrorCode, std::string> error_of(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return {e.code(), e.what()};
  }
  ADD_FAILURE() << "no Error thrown";
  return {ErrorCode::kInternal, ""};
}

std::string inline_error(const std::string& json) {
  auto [code, message] = error_of([&] { testing::parse_inline(json); });
  EXPECT_EQ(code, ErrorCode::kInvalidArgument) << message;
  return message;
}

class ModelFileErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("attnkit_model_errors_" +
            std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path write(const std::string& name, const std::string& text) {
    const fs::path p = dir_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p;
  }
  fs::path dir_;
};

TEST_F(ModelFileErrors, BadJsonNamesTheFileAndThePosition) {
  const fs::path p =
      write("broken.json", "{\n  \"model_type\": \"llama\",\n  \"num_hidden_layers\": }\n");
  auto [code, message] = error_of([&] { load_model(p.string()); });
  EXPECT_EQ(code, ErrorCode::kInvalidArgument);
  EXPECT_NE(message.find("Cannot read model config '" + p.string() + "'"), std::string::npos)
      << message;
  EXPECT_NE(message.find("invalid JSON"), std::string::npos) << message;
  EXPECT_NE(message.find("line 3"), std::string::npos) << message;
  EXPECT_EQ(message.find("[json.exception"), std::string::npos) << message;
}

TEST_F(ModelFileErrors, MissingFieldNamesTheFileAndTheField) {
  const fs::path p = write("llama.json", R"({"model_type": "llama", "num_hidden_layers": 4,
      "hidden_size": 4096})");
  auto [code, message] = error_of([&] { load_model_file(p); });
  EXPECT_EQ(code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(message, "Cannot read model config '" + p.string() +
                         "': field 'num_attention_heads' is missing");
}

TEST_F(ModelFileErrors, FolderWithConfigJsonIsReadAndNamedAfterTheFolder) {
  write("Qwen2-0.5B/config.json", R"({"model_type": "qwen2", "num_hidden_layers": 24,
      "hidden_size": 896, "num_attention_heads": 14, "num_key_value_heads": 2})");
  const ModelDescription m = load_model((dir_ / "Qwen2-0.5B").string());
  EXPECT_EQ(m.name, "Qwen2-0.5B");
  EXPECT_EQ(m.layers.size(), 24u);
  EXPECT_EQ(m.source, (dir_ / "Qwen2-0.5B" / "config.json").string());
}

TEST_F(ModelFileErrors, MissingFileIsNotFound) {
  auto [code, message] = error_of([&] { load_model((dir_ / "nope.json").string()); });
  EXPECT_EQ(code, ErrorCode::kNotFound);
  EXPECT_NE(
      message.find("Model config file '" + (dir_ / "nope.json").string() + "' does not exist"),
      std::string::npos)
      << message;
  auto [code2, message2] = error_of([&] { load_model_file(dir_); });  // folder, no config.json
  EXPECT_EQ(code2, ErrorCode::kNotFound);
  EXPECT_NE(message2.find("config.json' does not exist"), std::string::npos) << message2;
}

// A FIFO would block the read forever and /dev/null reads as empty: both are refused as
// what they are, not as a missing file or bad JSON.
TEST_F(ModelFileErrors, DevicesAndFifosAreNotRegularFiles) {
  auto [code, message] = error_of([] { load_model("/dev/null"); });
  EXPECT_EQ(code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(message,
            "Model config file '/dev/null' is not a regular file (a FIFO, socket or device): "
            "give a file");
  const fs::path fifo = dir_ / "config.fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto [code2, message2] = error_of([&] { load_model(fifo.string()); });
  EXPECT_EQ(code2, ErrorCode::kInvalidArgument);
  EXPECT_NE(message2.find("is not a regular file"), std::string::npos) << message2;
}

TEST_F(ModelFileErrors, TextAfterANulByteIsRefused) {
  const fs::path p = write("nul.json", std::string(R"({"model_type": "llama"})") +
                                           std::string(1, '\0') + "{\"num_hidden_layers\": 2}");
  auto [code, message] = error_of([&] { load_model(p.string()); });
  EXPECT_EQ(code, ErrorCode::kInvalidArgument);
  EXPECT_NE(message.find("invalid JSON: NUL byte at offset 23"), std::string::npos) << message;
}

// Nested 100000 deep, the value used to overflow the stack while the error message was
// built; the parser now stops at kMaxJsonDepth.
TEST(ModelErrors, DeeplyNestedValuesAreRefusedAtParseTime) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_NE(inline_error(deep).find("invalid JSON: values nest more than 64 arrays or objects "
                                    "deep"),
            std::string::npos);
  const std::string in_field = R"({"model_type": "llama", "rope_scaling": )" +
                               std::string(70, '[') + std::string(70, ']') + "}";
  EXPECT_NE(inline_error(in_field).find("(inside 'rope_scaling[][][]"), std::string::npos);
  // 64 deep is fine as JSON (and then refused for what it holds).
  const std::string at_limit = R"({"model_type": "llama", "num_hidden_layers": 2,
      "num_attention_heads": 8, "head_dim": 64, "extra": )" +
                               std::string(63, '[') + std::string(63, ']') + "}";
  EXPECT_EQ(testing::parse_inline(at_limit).layers.size(), 2u);
}

TEST(ModelErrors, DuplicateKeysAreRefusedNamingTheKeyAndWhere) {
  EXPECT_EQ(inline_error(R"({"model_type": "llama", "num_hidden_layers": 2,
      "num_hidden_layers": 4, "num_attention_heads": 8, "head_dim": 64})"),
            "Cannot read model config 'inline.json': invalid JSON: duplicate key "
            "'num_hidden_layers' in the top-level object: each key may appear once (which "
            "value was meant?)");
  EXPECT_NE(inline_error(R"({"model_type": "llama4", "text_config": {"model_type": "llama4_text",
      "head_dim": 128, "head_dim": 64}})")
                .find("duplicate key 'head_dim' in 'text_config'"),
            std::string::npos);
}

// Sizes large enough to overflow products and sums (head_dim INT_MAX printed a page of
// 18446744073709551360 bytes; kv_lora_rank INT_MAX gave head size -2147483585).
TEST(ModelErrors, SizeFieldsAreBoundedWithTheBoundInTheMessage) {
  EXPECT_EQ(inline_error(R"({"model_type": "llama", "num_hidden_layers": 2,
      "num_attention_heads": 8, "head_dim": 2147483647})"),
            "Cannot read model config 'inline.json': field 'head_dim' must be at most 4096, got "
            "2147483647");
  EXPECT_EQ(inline_error(R"({"model_type": "llama", "num_hidden_layers": 2,
      "num_attention_heads": 100000, "head_dim": 64})"),
            "Cannot read model config 'inline.json': field 'num_attention_heads' must be at "
            "most 1024, got 100000");
  EXPECT_NE(inline_error(R"({"model_type": "llama", "num_hidden_layers": 2,
      "num_attention_heads": 8, "hidden_size": 2147483640})")
                .find("field 'hidden_size' must be at most 1048576"),
            std::string::npos);
  const std::string mla = R"({"model_type": "deepseek_v3", "num_hidden_layers": 2,
      "num_attention_heads": 16, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
      "v_head_dim": 128, "kv_lora_rank": )";
  EXPECT_NE(inline_error(mla + "2147483647}").find("field 'kv_lora_rank' must be at most 8192"),
            std::string::npos);
  EXPECT_NE(inline_error(R"({"model_type": "deepseek_v3", "num_hidden_layers": 2,
      "num_attention_heads": 16, "qk_rope_head_dim": 64, "qk_nope_head_dim": 2147483647,
      "v_head_dim": 128, "kv_lora_rank": 512})")
                .find("field 'qk_nope_head_dim' must be at most 1024"),
            std::string::npos);
  EXPECT_NE(inline_error(R"({"model_type": "mistral", "num_hidden_layers": 2,
      "num_attention_heads": 8, "head_dim": 64, "sliding_window": 2147483647})")
                .find("field 'sliding_window' must be at most 1073741824"),
            std::string::npos);
  // The bounds themselves are accepted.
  EXPECT_EQ(testing::parse_inline(mla + "8192}").layers.front().head_size, 8192 + 64);
}

// Values that make every score NaN, inf or 0 used to load, and `run` finished with NaN
// outputs and exit 0.
TEST(ModelErrors, ScalesAndSoftCapsMustBeNormalPositiveFloat32) {
  const std::string gemma = R"({"model_type": "gemma2", "num_hidden_layers": 2,
      "num_attention_heads": 8, "head_dim": 256, )";
  EXPECT_EQ(inline_error(gemma + R"("query_pre_attn_scalar": 1e-300})"),
            "Cannot read model config 'inline.json': field 'query_pre_attn_scalar' gives a "
            "softmax scale 1e+150 (as float32: inf); it must be a positive, finite, normal "
            "float32 (1.17549e-38 to 3.40282e+38)");
  EXPECT_NE(inline_error(gemma + R"("query_pre_attn_scalar": 1e300})")
                .find("gives a softmax scale 1e-150 (as float32: 0)"),
            std::string::npos);
  EXPECT_NE(inline_error(gemma + R"("attn_logit_softcapping": 1e300})")
                .find("field 'attn_logit_softcapping' gives a soft-cap 1e+300 (as float32: inf)"),
            std::string::npos);
  EXPECT_NE(inline_error(gemma + R"("attn_logit_softcapping": 1e-300})")
                .find("field 'attn_logit_softcapping' gives a soft-cap 1e-300 (as float32: 0)"),
            std::string::npos);
  // mscale = 0.1 * mscale_all_dim * ln(factor) + 1 = 0: the scale would be 0.
  EXPECT_NE(inline_error(R"({"model_type": "deepseek_v3", "num_hidden_layers": 2,
      "num_attention_heads": 16, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
      "v_head_dim": 128, "kv_lora_rank": 512,
      "rope_scaling": {"factor": 2.718281828459045, "mscale_all_dim": -10}})")
                .find("field 'rope_scaling.mscale_all_dim' gives a softmax scale"),
            std::string::npos);
}

TEST(ModelErrors, AMistypedDtypeIsRefused) {
  EXPECT_EQ(inline_error(R"({"model_type": "llama", "num_hidden_layers": 2,
      "num_attention_heads": 8, "head_dim": 64, "torch_dtype": 5})"),
            "Cannot read model config 'inline.json': field 'torch_dtype' must be a dtype name "
            "such as \"bfloat16\", got 5");
}

TEST(ModelErrors, UnknownModelNameListsTheEmbeddedModels) {
  auto [code, message] = error_of([] { load_model("gemma-99b"); });
  EXPECT_EQ(code, ErrorCode::kNotFound);
  EXPECT_NE(message.find("Unknown model 'gemma-99b'"), std::string::npos) << message;
  std::string list;
  for (const std::string& n : embedded_model_names()) list += (list.empty() ? "" : ", ") + n;
  EXPECT_NE(message.find("Valid embedded models are: " + list), std::string::npos) << message;
  EXPECT_NE(list.find("gemma-3-1b-it"), std::string::npos);
  EXPECT_TRUE(embedded_model_config("gemma-99b").empty());
}

TEST(ModelErrors, NestedFieldIsNamedWithItsPath) {
  const std::string m = inline_error(R"({"model_type": "llama4",
      "text_config": {"model_type": "llama4_text", "num_hidden_layers": 4, "head_dim": 128}})");
  EXPECT_EQ(m,
            "Cannot read model config 'inline.json': field "
            "'text_config.num_attention_heads' is missing");
}

TEST(ModelErrors, WrongTypesNameTheFieldAndTheValue) {
  EXPECT_EQ(inline_error(R"({"model_type": "llama", "num_hidden_layers": "many"})"),
            "Cannot read model config 'inline.json': field 'num_hidden_layers' must be a "
            "positive integer, got \"many\"");
  EXPECT_EQ(inline_error(R"({"model_type": "mistral", "num_hidden_layers": 2,
      "num_attention_heads": 8, "head_dim": 64, "sliding_window": -5})"),
            "Cannot read model config 'inline.json': field 'sliding_window' must be a "
            "positive integer, got -5");
  EXPECT_EQ(inline_error(R"({"model_type": "qwen2", "num_hidden_layers": 2,
      "num_attention_heads": 8, "head_dim": 64, "use_sliding_window": "yes"})"),
            "Cannot read model config 'inline.json': field 'use_sliding_window' must be true "
            "or false, got \"yes\"");
  EXPECT_NE(inline_error("[1, 2]").find("the top level must be a JSON object"), std::string::npos);
}

// A corrupt layer count fails with a message instead of allocating its layers (found by
// the model_config fuzzer: 4E8 layers in a Llama-4 text config); every family's count.
TEST(ModelErrors, LayerCountsAboveTheLimitAreRefused) {
  EXPECT_EQ(inline_error(R"({"model_type": "llama4", "text_config": {"model_type": "llama4_text",
      "num_hidden_layers": 4E8, "num_attention_heads": 40, "hidden_size": 5120}})"),
            "Cannot read model config 'inline.json': field 'text_config.num_hidden_layers' "
            "must be at most 1024 layers (published models have up to about 200), got 400000000");
  EXPECT_NE(inline_error(R"({"model_type": "bert", "num_hidden_layers": 1025,
      "num_attention_heads": 12, "hidden_size": 768})")
                .find("field 'num_hidden_layers' must be at most 1024 layers"),
            std::string::npos);
  EXPECT_NE(inline_error(R"({"model_type": "whisper", "encoder_layers": 4, "decoder_layers": 5000,
      "encoder_attention_heads": 6, "decoder_attention_heads": 6, "d_model": 384})")
                .find("field 'decoder_layers' must be at most 1024 layers"),
            std::string::npos);
  EXPECT_NE(inline_error(R"({"model_type": "t5", "num_layers": 6, "num_decoder_layers": 99999,
      "num_heads": 8, "d_kv": 64})")
                .find("field 'num_decoder_layers' must be at most 1024 layers"),
            std::string::npos);
  // 1024 itself is accepted.
  EXPECT_EQ(testing::parse_inline(R"({"model_type": "llama", "num_hidden_layers": 1024,
      "num_attention_heads": 8, "head_dim": 64})")
                .layers.size(),
            1024u);
}

TEST(ModelErrors, HeadShapeInconsistencies) {
  EXPECT_EQ(inline_error(R"({"model_type": "llama", "num_hidden_layers": 2,
      "num_attention_heads": 32, "num_key_value_heads": 5, "hidden_size": 4096})"),
            "Cannot read model config 'inline.json': field 'num_key_value_heads' (5) must "
            "divide num_attention_heads (32)");
  EXPECT_NE(inline_error(R"({"model_type": "llama", "num_hidden_layers": 2,
      "num_attention_heads": 3, "hidden_size": 100})")
                .find("field 'hidden_size' (100) is not a multiple of num_attention_heads (3)"),
            std::string::npos);
  EXPECT_NE(inline_error(R"({"model_type": "llama", "num_hidden_layers": 2,
      "num_attention_heads": 4})")
                .find("field 'head_dim' is missing (and so is 'hidden_size'"),
            std::string::npos);
}

TEST(ModelErrors, LayerTypesProblems) {
  EXPECT_EQ(inline_error(R"({"model_type": "gpt_oss", "num_hidden_layers": 3,
      "num_attention_heads": 8, "head_dim": 64, "sliding_window": 128,
      "layer_types": ["sliding_attention", "full_attention"]})"),
            "Cannot read model config 'inline.json': field 'layer_types' has 2 entries but "
            "num_hidden_layers is 3");
  const std::string unknown = inline_error(R"({"model_type": "gpt_oss", "num_hidden_layers": 1,
      "num_attention_heads": 8, "head_dim": 64, "layer_types": ["diagonal_attention"]})");
  EXPECT_NE(unknown.find("field 'layer_types' has unknown value 'diagonal_attention' at index 0. "
                         "Valid values are: attention, chunked_attention"),
            std::string::npos)
      << unknown;
  EXPECT_NE(unknown.find("linear_attention, local_attention, mamba"), std::string::npos);
  EXPECT_EQ(inline_error(R"({"model_type": "gpt_oss", "num_hidden_layers": 1,
      "num_attention_heads": 8, "head_dim": 64, "layer_types": ["sliding_attention"]})"),
            "Cannot read model config 'inline.json': field 'sliding_window' is missing, but "
            "layer 0 is 'sliding_attention'");
  EXPECT_EQ(inline_error(R"({"model_type": "gemma2", "num_hidden_layers": 2,
      "num_attention_heads": 8, "head_dim": 64})"),
            "Cannot read model config 'inline.json': field 'sliding_window' is missing, but "
            "layer 0 is 'sliding_attention'");
  EXPECT_EQ(inline_error(R"({"model_type": "llama4_text", "num_hidden_layers": 1,
      "num_attention_heads": 8, "head_dim": 64, "layer_types": ["chunked_attention"]})"),
            "Cannot read model config 'inline.json': field 'attention_chunk_size' is missing, "
            "but layer 0 is 'chunked_attention'");
  EXPECT_EQ(inline_error(R"({"model_type": "llama4_text", "num_hidden_layers": 2,
      "num_attention_heads": 8, "head_dim": 64, "no_rope_layers": [1]})"),
            "Cannot read model config 'inline.json': field 'no_rope_layers' has 1 entries but "
            "num_hidden_layers is 2");
}

TEST(ModelErrors, MlaAndEncoderDecoderFieldsAreRequired) {
  EXPECT_EQ(inline_error(R"({"model_type": "deepseek_v2", "num_hidden_layers": 2,
      "num_attention_heads": 16, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
      "qk_nope_head_dim": 128})"),
            "Cannot read model config 'inline.json': field 'v_head_dim' is missing");
  EXPECT_EQ(inline_error(R"({"model_type": "whisper", "d_model": 384, "encoder_layers": 4,
      "decoder_layers": 4, "encoder_attention_heads": 6, "max_source_positions": 1500})"),
            "Cannot read model config 'inline.json': field 'decoder_attention_heads' is missing");
  EXPECT_EQ(inline_error(R"({"model_type": "t5", "d_model": 512, "num_layers": 2,
      "num_heads": 8})"),
            "Cannot read model config 'inline.json': field 'd_kv' is missing");
}

TEST(ModelErrors, UnknownModelTypeWithoutAttentionFieldsListsTheFieldsLookedFor) {
  const std::string m = inline_error(R"({"model_type": "rwkv", "hidden_size": 2048})");
  EXPECT_EQ(m,
            "Cannot read model config 'inline.json': model_type 'rwkv' is not one attnkit knows, "
            "and it has none of the attention fields attnkit reads an unknown model by: "
            "num_attention_heads (plain decoder, with num_hidden_layers, num_key_value_heads, "
            "head_dim or hidden_size), kv_lora_rank + qk_rope_head_dim (multi-head latent "
            "attention), or is_encoder_decoder + encoder_layers (encoder-decoder)");
}

TEST(ModelErrors, UnknownModelTypeWithSomeStandardFieldsSaysHowItWasRead) {
  const std::string m =
      inline_error(R"({"model_type": "rwkv", "hidden_size": 2048, "num_attention_heads": 8})");
  EXPECT_NE(m.find("field 'num_hidden_layers' is missing"), std::string::npos) << m;
  EXPECT_NE(m.find("model_type 'rwkv' is not one attnkit knows, so it is read as a plain "
                   "decoder"),
            std::string::npos)
      << m;
}

}  // namespace
}  // namespace attnkit
