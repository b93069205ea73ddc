// The loader: where libraries come from and exactly why each bad one is rejected.
#include "attnkit/plugin/plugin_loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "plugin/plugin_test_util.h"
#include "support/fake_backend.h"

namespace attnkit {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::plugin_error_of;

const std::string kOk = ATTNKIT_PLUGIN_FIXTURE_OK;

// Loads `path` into a fresh empty registry, expecting a rejection; returns its message
// after checking the code, the path in it and that nothing was registered.
std::string rejection(const std::string& path, const PluginLoadOptions& options = {}) {
  BackendRegistry registry(BackendRegistry::Contents::kEmpty);
  const Error e = plugin_error_of([&] { load_plugin(path, registry, options); });
  EXPECT_EQ(e.code(), ErrorCode::kPluginError);
  EXPECT_THAT(e.what(), HasSubstr("plugin library '" + path + "' rejected"));
  EXPECT_TRUE(registry.names().empty());
  return e.what();
}

TEST(PluginLoader, RejectsMissingFile) {
  EXPECT_THAT(rejection("/nonexistent/libattnkit_nothing.so"), HasSubstr("not found"));
}

TEST(PluginLoader, RejectsDirectory) {
  EXPECT_THAT(rejection(std::filesystem::temp_directory_path().string()),
              HasSubstr("is a directory"));
}

TEST(PluginLoader, RejectsFileThatIsNotASharedLibrary) {
  const auto path = std::filesystem::temp_directory_path() / "attnkit_not_a_library.so";
  std::ofstream(path) << "plain text, not ELF\n";
  EXPECT_THAT(rejection(path.string()), HasSubstr("cannot be loaded"));
  std::filesystem::remove(path);
}

TEST(PluginLoader, RejectsLibraryWithoutEntryPoint) {
  EXPECT_THAT(rejection(ATTNKIT_PLUGIN_FIXTURE_NO_INIT),
              HasSubstr("missing symbol attnkit_plugin_init"));
}

TEST(PluginLoader, RejectsTooNewAbiVersion) {
  const std::string why = rejection(ATTNKIT_PLUGIN_FIXTURE_ABI_TOO_NEW);
  EXPECT_THAT(why, HasSubstr("plugin ABI version 2 is too new"));
  EXPECT_THAT(why, HasSubstr("supports versions 1 to 1"));
}

TEST(PluginLoader, RejectsTooOldAbiVersion) {
  const std::string why = rejection(ATTNKIT_PLUGIN_FIXTURE_ABI_TOO_OLD);
  EXPECT_THAT(why, HasSubstr("plugin ABI version 0 is too old"));
  EXPECT_THAT(why, HasSubstr("rebuild the plugin"));
}

TEST(PluginLoader, RejectsLibraryWhoseBackendsAllScoreZero) {
  const std::string why = rejection(ATTNKIT_PLUGIN_FIXTURE_SCORE_ZERO);
  EXPECT_THAT(why, HasSubstr("no backend can run on this machine"));
  EXPECT_THAT(why, HasSubstr("FIXTURE: score 0, cannot run on this machine (needs the fixture "
                             "accelerator, which this machine lacks)"));
  EXPECT_THAT(why, HasSubstr("FIXTURE_GPU: score 0, cannot run on this machine (no GPU)"));
}

TEST(PluginLoader, ReportsInitFailureWithThePluginsMessage) {
  EXPECT_THAT(rejection(ATTNKIT_PLUGIN_FIXTURE_INIT_FAILS),
              HasSubstr("attnkit_plugin_init failed: unsupported: fixture refuses to initialise"));
}

TEST(PluginLoader, RejectsInvalidCapabilityCodes) {
  EXPECT_THAT(rejection(ATTNKIT_PLUGIN_FIXTURE_BAD_CAPS),
              HasSubstr("plugin backend FIXTURE: capabilities.dtypes[0] = 9 is not a valid code "
                        "(valid: 0 (float32), 1 (float16), 2 (bfloat16))"));
}

TEST(PluginLoader, RejectsADescriptorOfAnAbiVersionItCannotRead) {
  EXPECT_THAT(rejection(ATTNKIT_PLUGIN_FIXTURE_DESC_ABI_TOO_NEW),
              HasSubstr("plugin backend FIXTURE (" ATTNKIT_PLUGIN_FIXTURE_DESC_ABI_TOO_NEW
                        "): abi_version 7 is outside the versions 1 to 1 this attnkit reads"));
}

TEST(PluginLoader, RejectsTheReservedNameAuto) {
  EXPECT_THAT(rejection(ATTNKIT_PLUGIN_FIXTURE_NAMED_AUTO),
              HasSubstr("backend name 'auto' is reserved: 'auto' asks the selector to choose"));
}

TEST(PluginLoader, RejectsAnEmptyPath) {
  EXPECT_THAT(rejection(""), HasSubstr("plugin library '' rejected: the path is empty"));
}

TEST(PluginLoader, RegistersRunnableBackendsAndReportsSkippedOnes) {
  BackendRegistry registry(BackendRegistry::Contents::kEmpty);
  const PluginLoadReport report = load_plugin(kOk, registry);
  EXPECT_EQ(report.path, kOk);
  EXPECT_EQ(report.plugin_name, "attnkit-test-fixture");
  EXPECT_EQ(report.abi_version, 1u);
  EXPECT_THAT(report.registered, ElementsAre("FIXTURE"));
  EXPECT_THAT(report.scores, ElementsAre(5u));
  EXPECT_THAT(report.skipped,
              ElementsAre("FIXTURE_GPU: score 0, cannot run on this machine (no GPU)"));
  EXPECT_THAT(registry.names(), ElementsAre("FIXTURE"));
  // Declared as "fixture": names are case-insensitive and canonical upper case.
  const auto backend = registry.get("Fixture");
  EXPECT_EQ(backend->name(), "FIXTURE");
  EXPECT_THAT(std::string(backend->description()), HasSubstr("[plugin "));
  EXPECT_EQ(registry.origin("FIXTURE"), BackendOrigin::kPlugin);
  EXPECT_EQ(registry.library("FIXTURE"), kOk);
}

TEST(PluginLoader, RejectsDuplicateNameWithoutOverrideAndKeepsTheFirst) {
  BackendRegistry registry(BackendRegistry::Contents::kEmpty);
  registry.register_backend("FIXTURE", testing::fake_factory("FIXTURE", testing::basic_caps()));
  const Error e = plugin_error_of([&] { load_plugin(kOk, registry); });
  EXPECT_EQ(e.code(), ErrorCode::kPluginError);
  EXPECT_THAT(e.what(), HasSubstr("backend name FIXTURE is already registered (registered)"));
  EXPECT_EQ(registry.get("FIXTURE")->description(), "test backend");  // the fake, untouched
}

TEST(PluginLoader, LoadingTheSameLibraryTwiceIsADuplicate) {
  BackendRegistry registry(BackendRegistry::Contents::kEmpty);
  load_plugin(kOk, registry);
  const Error e = plugin_error_of([&] { load_plugin(kOk, registry); });
  EXPECT_THAT(e.what(), HasSubstr("FIXTURE is already registered"));
  EXPECT_THAT(registry.names(), ElementsAre("FIXTURE"));
}

TEST(PluginLoader, OverrideReplacesAnExistingName) {
  BackendRegistry registry(BackendRegistry::Contents::kEmpty);
  registry.register_backend("FIXTURE", testing::fake_factory("FIXTURE", testing::basic_caps()));
  PluginLoadOptions options;
  options.allow_override = true;
  load_plugin(kOk, registry, options);
  EXPECT_THAT(std::string(registry.get("FIXTURE")->description()), HasSubstr("[plugin "));
}

TEST(PluginLoader, CanAlsoRegisterABackendUnderCustom) {
  BackendRegistry registry(BackendRegistry::Contents::kEmpty);
  EXPECT_FALSE(registry.contains("CUSTOM"));
  PluginLoadOptions options;
  options.register_as_custom = "fixture";
  load_plugin(kOk, registry, options);
  ASSERT_TRUE(registry.contains("custom"));
  EXPECT_EQ(registry.get("CUSTOM")->name(), "FIXTURE");
  EXPECT_THAT(registry.names(), ElementsAre("FIXTURE", "CUSTOM"));
}

TEST(PluginLoader, RegisterAsCustomMustNameARegisteredBackend) {
  PluginLoadOptions options;
  options.register_as_custom = "FIXTURE_GPU";  // scores 0, so it is not registered
  EXPECT_THAT(rejection(kOk, options),
              HasSubstr("register_as_custom names FIXTURE_GPU, which this plugin does not "
                        "register (it registers: FIXTURE)"));
}

TEST(PluginLoader, LoadsAColonSeparatedListInOrderAndStopsAtTheFirstRejection) {
  BackendRegistry registry(BackendRegistry::Contents::kEmpty);
  const auto reports = load_plugins(":" + kOk + "::", registry);
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_THAT(registry.names(), ElementsAre("FIXTURE"));

  BackendRegistry second(BackendRegistry::Contents::kEmpty);
  const Error e =
      plugin_error_of([&] { load_plugins(kOk + ":/nonexistent/libmissing.so:" + kOk, second); });
  EXPECT_THAT(e.what(), HasSubstr("'/nonexistent/libmissing.so' rejected: not found"));
  EXPECT_THAT(second.names(), ElementsAre("FIXTURE"));  // the one before the failure stays
}

TEST(PluginLoader, ReadsTheEnvironmentVariable) {
  BackendRegistry registry(BackendRegistry::Contents::kEmpty);
  ::unsetenv("ATTNKIT_PLUGIN_PATH");
  EXPECT_TRUE(load_plugins_from_environment(registry).empty());

  ::setenv("ATTNKIT_PLUGIN_PATH", (kOk + ":").c_str(), 1);
  EXPECT_EQ(load_plugins_from_environment(registry).size(), 1u);
  EXPECT_THAT(registry.names(), ElementsAre("FIXTURE"));

  ::setenv("ATTNKIT_PLUGIN_PATH", "/nonexistent/libmissing.so", 1);
  const Error e = plugin_error_of([&] { load_plugins_from_environment(registry); });
  EXPECT_THAT(e.what(), HasSubstr("(from ATTNKIT_PLUGIN_PATH=/nonexistent/libmissing.so)"));
  ::unsetenv("ATTNKIT_PLUGIN_PATH");
}

TEST(PluginLoader, RejectedLibraryIsUnloaded) {
  rejection(ATTNKIT_PLUGIN_FIXTURE_SCORE_ZERO);
  EXPECT_FALSE(testing::library_is_loaded(ATTNKIT_PLUGIN_FIXTURE_SCORE_ZERO));
}

}  // namespace
}  // namespace attnkit
