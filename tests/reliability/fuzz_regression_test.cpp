// Replays every fuzz regression input (fuzz/regressions/<target>/) and every seed corpus
// file (fuzz/corpus/<target>/) through the same property checks the fuzzers run, so a
// crash found once stays fixed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "properties/attention_config_property.h"
#include "properties/metadata_property.h"
#include "properties/model_config_property.h"

namespace attnkit {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> inputs_of(const std::string& target) {
  std::vector<fs::path> files;
  for (const char* kind : {"regressions", "corpus"}) {
    const fs::path dir = fs::path(ATTNKIT_SOURCE_DIR) / "fuzz" / kind / target;
    if (!fs::exists(dir)) continue;
    for (const auto& entry : fs::directory_iterator(dir)) files.push_back(entry.path());
  }
  return files;
}

std::string read_all(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(FuzzRegression, AttentionConfigInputsKeepTheirProperty) {
  const auto files = inputs_of("attention_config");
  ASSERT_GE(files.size(), 2u);
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    EXPECT_NO_THROW(fuzz::check_attention_config(read_all(f)));
  }
}

TEST(FuzzRegression, ModelConfigInputsKeepTheirProperty) {
  const auto files = inputs_of("model_config");
  ASSERT_GE(files.size(), 2u);
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    EXPECT_NO_THROW(fuzz::check_model_config(read_all(f)));
  }
}

TEST(FuzzRegression, MetadataInputsKeepTheirProperty) {
  const auto files = inputs_of("metadata");
  ASSERT_GE(files.size(), 2u);
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    const std::string bytes = read_all(f);
    EXPECT_NO_THROW(
        fuzz::check_metadata(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  }
}

// The two finds behind fuzz/regressions/*/number_overflow: a JSON number too large for a
// double is a user error with the parser's position, not an escaped library exception.
TEST(FuzzRegression, NumberOverflowInJsonIsAUserError) {
  try {
    parse_attention_config(R"({"backend_per_kind": {"sliding_window": 1e999999}})");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("1e999999"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attnkit
