#include "attnkit/registry/registry.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "attnkit/core/error.h"
#include "support/fake_backend.h"

namespace attnkit {
namespace {

using testing::basic_caps;
using ::testing::ElementsAre;
using testing::fake_factory;
using ::testing::HasSubstr;

// The message of the Error `fn` throws (fails the test when it throws nothing).
template <typename Fn>
std::string error_message(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected attnkit::Error";
  return {};
}

TEST(BackendRegistry, EmptyRegistryKnowsOnlyTheReservedCustomName) {
  BackendRegistry registry(BackendRegistry::Contents::kEmpty);
  EXPECT_TRUE(registry.names().empty());
  EXPECT_FALSE(registry.contains("CUSTOM"));
  EXPECT_EQ(registry.valid_options(), "CUSTOM");
}

TEST(BackendRegistry, LookupIsCaseInsensitiveAndReturnsCanonicalName) {
  BackendRegistry registry(BackendRegistry::Contents::kEmpty);
  registry.register_backend("My_Backend", fake_factory("MY_BACKEND", basic_caps()));
  EXPECT_THAT(registry.names(), ElementsAre("MY_BACKEND"));
  EXPECT_EQ(registry.canonical_name("my_backend"), "MY_BACKEND");
  EXPECT_EQ(registry.canonical_name("MY_BACKEND"), "MY_BACKEND");
  EXPECT_TRUE(registry.contains("mY_bAcKeNd"));
  EXPECT_EQ(registry.get("my_backend")->name(), "MY_BACKEND");
}

TEST(BackendRegistry, UnknownNameListsValidOptionsSorted) {
  BackendRegistry registry(BackendRegistry::Contents::kEmpty);
  registry.register_backend("ZETA", fake_factory("ZETA", basic_caps()));
  registry.register_backend("ALPHA", fake_factory("ALPHA", basic_caps()));
  const std::string expected =
      "Unknown attention backend: 'nope'. Valid options are: ALPHA, CUSTOM, ZETA";
  EXPECT_EQ(error_message([&] { registry.canonical_name("nope"); }), expected);
  EXPECT_EQ(error_message([&] { registry.get("nope"); }), expected);
  try {
    registry.get("nope");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
  }
}

TEST(BackendRegistry, CustomMustBeRegisteredBeforeUse) {
  BackendRegistry registry(BackendRegistry::Contents::kEmpty);
  EXPECT_EQ(error_message([&] { registry.get("CUSTOM"); }),
            "Backend CUSTOM must be registered before use");
  EXPECT_EQ(error_message([&] { registry.canonical_name("custom"); }),
            "Backend CUSTOM must be registered before use");

  registry.register_backend("custom", fake_factory("CUSTOM", basic_caps()));
  EXPECT_TRUE(registry.contains("CUSTOM"));
  EXPECT_EQ(registry.get("Custom")->name(), "CUSTOM");
  EXPECT_THAT(registry.names(), ElementsAre("CUSTOM"));
  EXPECT_EQ(registry.valid_options(), "CUSTOM");
}

TEST(BackendRegistry, FactoryRunsLazilyOnceAndInstanceIsCached) {
  BackendRegistry registry(BackendRegistry::Contents::kEmpty);
  auto calls = std::make_shared<int>(0);
  registry.register_backend("LAZY", fake_factory("LAZY", basic_caps(), calls));
  EXPECT_EQ(*calls, 0);
  auto first = registry.get("LAZY");
  auto second = registry.get("lazy");
  EXPECT_EQ(*calls, 1);
  EXPECT_EQ(first.get(), second.get());
}

TEST(BackendRegistry, OverrideReplacesInstanceAndKeepsPosition) {
  BackendRegistry registry(BackendRegistry::Contents::kEmpty);
  BackendCapabilities old_caps = basic_caps();
  old_caps.preferred_block_size = 16;
  BackendCapabilities new_caps = basic_caps();
  new_caps.preferred_block_size = 32;
  registry.register_backend("FIRST", fake_factory("FIRST", old_caps));
  registry.register_backend("SECOND", fake_factory("SECOND", basic_caps()));
  auto before = registry.get("FIRST");
  const uint64_t generation = registry.generation();

  registry.register_backend("first", fake_factory("FIRST", new_caps));
  EXPECT_GT(registry.generation(), generation);
  EXPECT_THAT(registry.names(), ElementsAre("FIRST", "SECOND"));
  auto after = registry.get("FIRST");
  EXPECT_NE(before.get(), after.get());
  EXPECT_EQ(after->capabilities().preferred_block_size, 32);
  // The old instance stays alive for whoever still holds it.
  EXPECT_EQ(before->capabilities().preferred_block_size, 16);
}

TEST(BackendRegistry, OverrideCanBeRefused) {
  BackendRegistry registry(BackendRegistry::Contents::kEmpty);
  registry.register_backend("ONCE", fake_factory("ONCE", basic_caps()));
  EXPECT_EQ(error_message([&] {
              registry.register_backend("once", fake_factory("ONCE", basic_caps()),
                                        /*allow_override=*/false);
            }),
            "Backend ONCE is already registered (registered); pass allow_override = true to "
            "replace it");
}

TEST(BackendRegistry, RejectsBadNamesAndEmptyFactories) {
  BackendRegistry registry(BackendRegistry::Contents::kEmpty);
  EXPECT_EQ(error_message([&] { registry.register_backend("", fake_factory("X", basic_caps())); }),
            "Invalid backend name '': use letters, digits and '_'");
  EXPECT_EQ(error_message(
                [&] { registry.register_backend("has space", fake_factory("X", basic_caps())); }),
            "Invalid backend name 'has space': use letters, digits and '_'");
  EXPECT_EQ(error_message([&] { registry.register_backend("EMPTY", BackendFactory{}); }),
            "register_backend('EMPTY'): the factory is empty");
  // "auto" asks the selector to choose: a backend under that name could never be chosen.
  EXPECT_THAT(
      error_message([&] { registry.register_backend("Auto", fake_factory("X", basic_caps())); }),
      HasSubstr("Backend name 'Auto' is reserved"));
  EXPECT_TRUE(registry.names().empty());
}

TEST(BackendRegistry, FactoryReturningNullIsAnInternalError) {
  BackendRegistry registry(BackendRegistry::Contents::kEmpty);
  registry.register_backend("NULL_FACTORY", [] { return std::unique_ptr<AttentionBackend>(); });
  try {
    registry.get("NULL_FACTORY");
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInternal);
    EXPECT_STREQ(e.what(), "The factory of backend NULL_FACTORY returned no backend");
  }
}

TEST(BackendRegistry, BuiltinRegistryHoldsTheExplicitListInOrder) {
  BackendRegistry registry;
  std::vector<std::string> expected;
  for (const BuiltinBackend& builtin : builtin_backends()) expected.emplace_back(builtin.name);
  EXPECT_EQ(registry.names(), expected);
  for (const std::string& name : expected) {
    EXPECT_TRUE(registry.is_builtin_name(name));
    EXPECT_EQ(registry.origin(name), BackendOrigin::kBuiltin);
    // Each built-in's factory makes a backend that calls itself by its registered name.
    EXPECT_EQ(registry.get(name)->name(), name);
  }
  EXPECT_FALSE(registry.contains("CUSTOM"));
}

TEST(BackendRegistry, RunTimeRegistrationsFollowBuiltinsAndOverridesKeepBuiltinName) {
  BackendRegistry registry;
  const size_t builtins = builtin_backends().size();
  registry.register_backend("EXTRA", fake_factory("EXTRA", basic_caps()));
  ASSERT_EQ(registry.names().size(), builtins + 1);
  EXPECT_EQ(registry.names().back(), "EXTRA");
  EXPECT_FALSE(registry.is_builtin_name("EXTRA"));
  EXPECT_EQ(registry.origin("extra"), BackendOrigin::kRegistered);
  for (const BuiltinBackend& builtin : builtin_backends()) {
    registry.register_backend(builtin.name, fake_factory(std::string(builtin.name), basic_caps()));
    EXPECT_TRUE(registry.is_builtin_name(builtin.name));
    EXPECT_EQ(registry.origin(builtin.name), BackendOrigin::kRegistered);
  }
}

TEST(BackendRegistry, IndependentRegistriesDoNotShareRegistrations) {
  BackendRegistry a(BackendRegistry::Contents::kEmpty);
  BackendRegistry b(BackendRegistry::Contents::kEmpty);
  a.register_backend("ONLY_IN_A", fake_factory("ONLY_IN_A", basic_caps()));
  EXPECT_TRUE(a.contains("ONLY_IN_A"));
  EXPECT_FALSE(b.contains("ONLY_IN_A"));
  EXPECT_FALSE(global_registry().contains("ONLY_IN_A"));
}

TEST(BackendRegistry, GlobalRegistryIsOneObjectAndRegisterBackendUsesIt) {
  EXPECT_EQ(&global_registry(), &global_registry());
  register_backend("GLOBAL_TEST_BACKEND", fake_factory("GLOBAL_TEST_BACKEND", basic_caps()));
  EXPECT_TRUE(global_registry().contains("global_test_backend"));
}

}  // namespace
}  // namespace attnkit
