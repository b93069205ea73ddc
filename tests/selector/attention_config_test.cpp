#include "attnkit/selector/attention_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "test_registry.h"

namespace attnkit {
namespace {

using testing::error_message;

class AttentionConfigTest : public ::testing::Test {
 protected:
  AttentionConfigTest() { testing::register_fake_builtins(registry_); }
  AttentionConfig parse(std::string_view text) { return parse_attention_config(text, registry_); }
  std::string parse_error(std::string_view text) {
    return error_message([&] { parse(text); });
  }
  BackendRegistry registry_{BackendRegistry::Contents::kEmpty};
};

TEST_F(AttentionConfigTest, EmptyObjectMeansAutomaticStrict) {
  const AttentionConfig config = parse("{}");
  EXPECT_EQ(config.backend, "auto");
  EXPECT_EQ(config.backend_source, BackendSource::kDefault);
  EXPECT_TRUE(config.backend_per_kind.empty());
  EXPECT_EQ(config.override_mode, OverrideMode::kStrict);
}

TEST_F(AttentionConfigTest, ParsesEveryKeyCaseInsensitivelyToCanonicalNames) {
  const AttentionConfig config = parse(R"({
    "backend": "cpu_flash",
    "backend_per_kind": {"sliding_window": "Reference", "MLA_ATTENTION": "cuda_mla",
                         "full_attention": "AUTO"},
    "override_mode": "Prefer"
  })");
  EXPECT_EQ(config.backend, "CPU_FLASH");
  EXPECT_EQ(config.backend_source, BackendSource::kConfig);
  ASSERT_EQ(config.backend_per_kind.size(), 3u);
  EXPECT_EQ(config.backend_per_kind.at(KvCacheKind::kSlidingWindow), "REFERENCE");
  EXPECT_EQ(config.backend_per_kind.at(KvCacheKind::kMlaAttention), "CUDA_MLA");
  EXPECT_EQ(config.backend_per_kind.at(KvCacheKind::kFullAttention), "auto");
  EXPECT_EQ(config.override_mode, OverrideMode::kPrefer);
}

TEST_F(AttentionConfigTest, ExplicitAutoCountsAsSetByTheConfig) {
  const AttentionConfig config = parse(R"({"backend": "auto"})");
  EXPECT_EQ(config.backend, "auto");
  EXPECT_EQ(config.backend_source, BackendSource::kConfig);
}

TEST_F(AttentionConfigTest, JsonRoundTrip) {
  const AttentionConfig config = parse(
      R"({"backend": "REFERENCE", "backend_per_kind": {"cross_attention": "cuda_paged"},
          "override_mode": "prefer"})");
  EXPECT_EQ(parse(to_json(config).dump()), config);
}

TEST_F(AttentionConfigTest, InvalidJsonIsAnError) {
  const std::string message = parse_error(R"({"backend": )");
  EXPECT_EQ(message.rfind("Attention config is not valid JSON: ", 0), 0u) << message;
  EXPECT_EQ(parse_error("").rfind("Attention config is not valid JSON: ", 0), 0u);
}

TEST_F(AttentionConfigTest, NonObjectIsAnError) {
  EXPECT_EQ(parse_error(R"(["CPU_FLASH"])"),
            R"(Attention config must be a JSON object, got array ["CPU_FLASH"])");
  EXPECT_EQ(parse_error(R"("CPU_FLASH")"),
            R"(Attention config must be a JSON object, got string "CPU_FLASH")");
}

TEST_F(AttentionConfigTest, UnknownKeyIsAnError) {
  EXPECT_EQ(parse_error(R"({"backends": "CPU_FLASH"})"),
            "Unknown key 'backends' in attention config. Valid keys are: backend, "
            "backend_per_kind, decode_backend, override_mode, prefill_backend, priority");
}

TEST_F(AttentionConfigTest, BackendMustBeAString) {
  EXPECT_EQ(parse_error(R"({"backend": 3})"),
            "Attention config: 'backend' must be a string, got number 3");
  EXPECT_EQ(parse_error(R"({"backend": null})"),
            "Attention config: 'backend' must be a string, got null null");
}

TEST_F(AttentionConfigTest, UnknownBackendListsValidOptions) {
  EXPECT_EQ(parse_error(R"({"backend": "FLASH_ATTN"})"),
            "Unknown attention backend: 'FLASH_ATTN'. Valid options are: auto, tuned, CPU_FLASH, "
            "CUDA_FLASH, "
            "CUDA_MLA, CUDA_PAGED, CUSTOM, REFERENCE");
}

TEST_F(AttentionConfigTest, UnregisteredCustomIsAnErrorAtParseTime) {
  EXPECT_EQ(parse_error(R"({"backend": "CUSTOM"})"),
            "Backend CUSTOM must be registered before use");
  EXPECT_EQ(parse_error(R"({"backend_per_kind": {"full_attention": "custom"}})"),
            "Backend CUSTOM must be registered before use");
  registry_.register_backend("CUSTOM", testing::fake_factory("CUSTOM", testing::full_caps()));
  EXPECT_EQ(parse(R"({"backend": "custom"})").backend, "CUSTOM");
}

TEST_F(AttentionConfigTest, BackendPerKindMustBeAnObject) {
  EXPECT_EQ(parse_error(R"({"backend_per_kind": ["full_attention"]})"),
            "Attention config: 'backend_per_kind' must be an object mapping KV cache group kinds "
            "to backend names, got array [\"full_attention\"]");
}

TEST_F(AttentionConfigTest, UnknownKindListsAllNineKindsSorted) {
  EXPECT_EQ(parse_error(R"({"backend_per_kind": {"full": "REFERENCE"}})"),
            "Unknown KV cache group kind 'full' in backend_per_kind. Valid kinds are: "
            "chunked_local_attention, cross_attention, encoder_only_attention, full_attention, "
            "mamba, mla_attention, sink_full_attention, sliding_window, sliding_window_mla");
}

TEST_F(AttentionConfigTest, PerKindBackendMustBeAKnownString) {
  EXPECT_EQ(parse_error(R"({"backend_per_kind": {"sliding_window": 1}})"),
            "Attention config: backend_per_kind['sliding_window'] must be a backend name or an "
            "object with prefill_backend and/or decode_backend, got number 1");
  EXPECT_EQ(parse_error(R"({"backend_per_kind": {"sliding_window": "NOPE"}})"),
            "Unknown attention backend: 'NOPE'. Valid options are: auto, tuned, CPU_FLASH, "
            "CUDA_FLASH, "
            "CUDA_MLA, CUDA_PAGED, CUSTOM, REFERENCE");
}

TEST_F(AttentionConfigTest, SameKindTwiceInDifferentCaseIsAnError) {
  EXPECT_EQ(parse_error(R"({"backend_per_kind": {"FULL_ATTENTION": "REFERENCE",
                                                 "full_attention": "CPU_FLASH"}})"),
            "KV cache group kind 'full_attention' appears twice in backend_per_kind");
}

// nlohmann keeps the last of two equal keys; the config refuses them instead of choosing.
TEST_F(AttentionConfigTest, DuplicateKeysAreAnError) {
  EXPECT_EQ(parse_error(R"({"backend": "REFERENCE", "backend": "CPU_FLASH"})"),
            "Attention config is not valid JSON: duplicate key 'backend' in the top-level "
            "object: each key may appear once (which value was meant?)");
  EXPECT_EQ(parse_error(R"({"backend_per_kind": {"full_attention": "REFERENCE",
                                                 "full_attention": "CPU_FLASH"}})"),
            "Attention config is not valid JSON: duplicate key 'full_attention' in "
            "'backend_per_kind': each key may appear once (which value was meant?)");
}

// 55000 deep inline used to overflow the stack in dump() while the message was built.
TEST_F(AttentionConfigTest, DeepNestingIsRefusedAtParseTime) {
  const std::string deep =
      R"({"backend": )" + std::string(55000, '[') + std::string(55000, ']') + "}";
  EXPECT_THAT(parse_error(deep),
              ::testing::StartsWith("Attention config is not valid JSON: values nest more than 64 "
                                    "arrays or objects deep (inside 'backend[][]"));
}

// Messages quote a long value only in part.
TEST_F(AttentionConfigTest, LongValuesAreQuotedInPart) {
  const std::string message = parse_error(R"({"backend": [")" + std::string(10000, 'x') + "\"]}");
  EXPECT_LT(message.size(), 200u) << message;
  EXPECT_THAT(message, ::testing::EndsWith("..."));
  // Also nlohmann's own message, which quotes the token it stopped at.
  EXPECT_LT(parse_error(R"({"backend": )" + std::string(10000, '1') + "}").size(), 400u);
}

TEST_F(AttentionConfigTest, UnknownOverrideModeListsBoth) {
  EXPECT_EQ(parse_error(R"({"override_mode": "fallback"})"),
            "Unknown override_mode 'fallback'. Valid options are: prefer, strict");
  EXPECT_EQ(parse_error(R"({"override_mode": true})"),
            "Attention config: 'override_mode' must be a string, got boolean true");
}

TEST_F(AttentionConfigTest, EnvironmentSetsTheGlobalBackend) {
  const AttentionConfig config = apply_backend_env(parse("{}"), "reference", registry_);
  EXPECT_EQ(config.backend, "REFERENCE");
  EXPECT_EQ(config.backend_source, BackendSource::kEnv);
}

TEST_F(AttentionConfigTest, EmptyOrMissingEnvironmentChangesNothing) {
  const AttentionConfig config = parse(R"({"backend": "CPU_FLASH"})");
  EXPECT_EQ(apply_backend_env(config, nullptr, registry_), config);
  EXPECT_EQ(apply_backend_env(config, "", registry_), config);
}

TEST_F(AttentionConfigTest, EnvironmentAndConfigBackendAreMutuallyExclusive) {
  const AttentionConfig config = parse(R"({"backend": "CPU_FLASH"})");
  EXPECT_EQ(error_message([&] { apply_backend_env(config, "REFERENCE", registry_); }),
            "ATTNKIT_ATTENTION_BACKEND=REFERENCE and the attention config's 'backend' "
            "(CPU_FLASH) are mutually exclusive; set only one of them");
  // Per-kind choices do not conflict with the environment's global backend.
  const AttentionConfig per_kind =
      parse(R"({"backend_per_kind": {"sliding_window": "CPU_FLASH"}})");
  const AttentionConfig applied = apply_backend_env(per_kind, "REFERENCE", registry_);
  EXPECT_EQ(applied.backend, "REFERENCE");
  EXPECT_EQ(applied.backend_per_kind, per_kind.backend_per_kind);
}

TEST_F(AttentionConfigTest, UnknownEnvironmentBackendSaysWhereItCameFrom) {
  EXPECT_EQ(error_message([&] { apply_backend_env(AttentionConfig{}, "XFORMERS", registry_); }),
            "Unknown attention backend: 'XFORMERS'. Valid options are: auto, tuned, CPU_FLASH, "
            "CUDA_FLASH, "
            "CUDA_MLA, CUDA_PAGED, CUSTOM, REFERENCE (set by ATTNKIT_ATTENTION_BACKEND)");
}

TEST_F(AttentionConfigTest, EnvironmentIsReadFromTheProcess) {
  ASSERT_EQ(setenv(kAttentionBackendEnvVar, "cpu_flash", 1), 0);
  const AttentionConfig config = apply_backend_env(AttentionConfig{}, registry_);
  ASSERT_EQ(unsetenv(kAttentionBackendEnvVar), 0);
  EXPECT_EQ(config.backend, "CPU_FLASH");
  EXPECT_EQ(config.backend_source, BackendSource::kEnv);
  EXPECT_EQ(apply_backend_env(AttentionConfig{}, registry_).backend, "auto");
}

TEST(OverrideMode, ParsesAndPrints) {
  EXPECT_EQ(parse_override_mode("STRICT"), OverrideMode::kStrict);
  EXPECT_EQ(parse_override_mode("prefer"), OverrideMode::kPrefer);
  EXPECT_EQ(to_string(OverrideMode::kStrict), "strict");
  EXPECT_EQ(to_string(OverrideMode::kPrefer), "prefer");
}

}  // namespace
}  // namespace attnkit

namespace attnkit {
namespace {

class LoadAttentionConfigTest : public ::testing::Test {
 protected:
  LoadAttentionConfigTest() {
    testing::register_fake_builtins(registry_);
    unsetenv(kAttentionBackendEnvVar);
  }
  ~LoadAttentionConfigTest() override {
    unsetenv(kAttentionBackendEnvVar);
    if (!path_.empty()) std::remove(path_.c_str());
  }
  std::string write_file(const std::string& contents) {
    char path[] = "/tmp/attnkit_attention_config_XXXXXX";
    const int fd = mkstemp(path);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(write(fd, contents.data(), contents.size()), static_cast<ssize_t>(contents.size()));
    close(fd);
    path_ = path;
    return path_;
  }
  BackendRegistry registry_{BackendRegistry::Contents::kEmpty};
  std::string path_;
};

TEST_F(LoadAttentionConfigTest, EmptyMeansDefaults) {
  EXPECT_EQ(load_attention_config("", registry_), AttentionConfig{});
}

TEST_F(LoadAttentionConfigTest, InlineJson) {
  const AttentionConfig config = load_attention_config(R"(  {"backend": "reference"})", registry_);
  EXPECT_EQ(config.backend, "REFERENCE");
  EXPECT_EQ(config.backend_source, BackendSource::kConfig);
}

TEST_F(LoadAttentionConfigTest, FileContents) {
  const std::string path = write_file(R"({"override_mode": "prefer"})");
  EXPECT_EQ(load_attention_config(path, registry_).override_mode, OverrideMode::kPrefer);
}

TEST_F(LoadAttentionConfigTest, MissingFileIsAnErrorNamingIt) {
  try {
    load_attention_config("/nonexistent/attention.json", registry_);
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_STREQ(e.what(), "Attention config file '/nonexistent/attention.json' does not exist");
  }
}

TEST_F(LoadAttentionConfigTest, AtPathReadsTheFile) {
  const std::string path = write_file(R"({"override_mode": "prefer"})");
  EXPECT_EQ(load_attention_config("@" + path, registry_).override_mode, OverrideMode::kPrefer);
  EXPECT_EQ(error_message([&] { load_attention_config("@", registry_); }),
            "Attention config '@' names no file: give @PATH, a path, or JSON text starting "
            "with '{'");
}

// A directory used to read as empty text ("invalid JSON"); a FIFO would block.
TEST_F(LoadAttentionConfigTest, DirectoriesAndDevicesAreNamedAsSuch) {
  EXPECT_EQ(error_message([&] { load_attention_config("/tmp", registry_); }),
            "Attention config file '/tmp' is a directory, not a file");
  EXPECT_EQ(error_message([&] { load_attention_config("/dev/null", registry_); }),
            "Attention config file '/dev/null' is not a regular file (a FIFO, socket or "
            "device): give a file");
}

TEST_F(LoadAttentionConfigTest, ErrorsInAFileArePrefixedWithItsPath) {
  const std::string path = write_file(R"({"mode": "prefer"})");
  EXPECT_EQ(error_message([&] { load_attention_config(path, registry_); }),
            path +
                ": Unknown key 'mode' in attention config. Valid keys are: backend, "
                "backend_per_kind, decode_backend, override_mode, prefill_backend, priority");
}

TEST_F(LoadAttentionConfigTest, AppliesTheEnvironment) {
  ASSERT_EQ(setenv(kAttentionBackendEnvVar, "CPU_FLASH", 1), 0);
  EXPECT_EQ(load_attention_config("", registry_).backend_source, BackendSource::kEnv);
  EXPECT_THAT(error_message([&] { load_attention_config(R"({"backend": "auto"})", registry_); }),
              ::testing::HasSubstr("are mutually exclusive"));
}

}  // namespace
}  // namespace attnkit
