// The options table (core/options.h): every option declared once, in enum order, and a bad
// switch value is an error naming the variable, the value and the valid ones.

#include "attnkit/core/options.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>

#include "attnkit/core/error.h"

namespace attnkit {
namespace {

using ::testing::HasSubstr;

TEST(Options, EveryOptionIsDeclaredOnceWithHelp) {
  std::set<std::string> names;
  for (const OptionInfo& info : all_options()) {
    EXPECT_TRUE(names.insert(std::string(info.name)).second) << info.name;
    EXPECT_EQ(&option_info(info.option), &info);
    EXPECT_EQ(info.name.substr(0, 8), "ATTNKIT_");
    EXPECT_FALSE(info.default_value.empty()) << info.name;
    EXPECT_FALSE(info.valid.empty()) << info.name;
    EXPECT_FALSE(info.help.empty()) << info.name;
  }
  EXPECT_EQ(names.size(), 11u);
}

TEST(Options, SwitchParsesItsSpellingsAndRejectsOthers) {
  const char* name = "ATTNKIT_CUDA_FLASH_WGMMA";
  ASSERT_EQ(unsetenv(name), 0);
  EXPECT_EQ(option_switch(Option::kCudaFlashWgmma), std::nullopt);
  for (const char* on : {"1", "on", "true"}) {
    ASSERT_EQ(setenv(name, on, 1), 0);
    EXPECT_EQ(option_switch(Option::kCudaFlashWgmma), true) << on;
  }
  for (const char* off : {"0", "off", "false"}) {
    ASSERT_EQ(setenv(name, off, 1), 0);
    EXPECT_EQ(option_switch(Option::kCudaFlashWgmma), false) << off;
  }
  ASSERT_EQ(setenv(name, "maybe", 1), 0);
  try {
    option_switch(Option::kCudaFlashWgmma);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("ATTNKIT_CUDA_FLASH_WGMMA=maybe is not valid (valid: 1, 0, "
                                    "on, off, true, false)"));
  }
  EXPECT_THAT(describe_options_in_force(), HasSubstr("ATTNKIT_CUDA_FLASH_WGMMA=maybe"));
  ASSERT_EQ(unsetenv(name), 0);
}

}  // namespace
}  // namespace attnkit
