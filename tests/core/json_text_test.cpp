// parse_json_text: the limits every user document gets, and Python's non-finite words.

#include "attnkit/core/json_text.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace attnkit {
namespace {

TEST(JsonText, PythonsNonFiniteWordsBecomeTheirFloats) {
  const nlohmann::json j = parse_json_text(
      R"({"limit": [0.0, Infinity], "low": -Infinity, "nan": NaN, "nested": {"x": [NaN]}})");
  EXPECT_EQ(j["limit"][1].get<double>(), std::numeric_limits<double>::infinity());
  EXPECT_EQ(j["low"].get<double>(), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(j["nan"].get<double>()));
  EXPECT_TRUE(std::isnan(j["nested"]["x"][0].get<double>()));
}

TEST(JsonText, TheWordsInsideStringsStayText) {
  const nlohmann::json j =
      parse_json_text(R"({"a": "Infinity", "b": "x\"NaN\" -Infinity", "Infinity": 1})");
  EXPECT_EQ(j["a"], "Infinity");
  EXPECT_EQ(j["b"], "x\"NaN\" -Infinity");
  EXPECT_EQ(j["Infinity"], 1);
}

TEST(JsonText, OtherBareWordsAndTheOldLimitsStillFail) {
  EXPECT_THROW(parse_json_text(R"({"a": Infinite})"), JsonTextError);
  EXPECT_THROW(parse_json_text(R"({"a": NaNa})"), JsonTextError);
  EXPECT_THROW(parse_json_text(R"({"a": 1, "a": 2})"), JsonTextError);
  try {
    parse_json_text(R"({"a": Infinity, "a": 2})");
    FAIL() << "a duplicate key was accepted";
  } catch (const JsonTextError& e) {
    EXPECT_NE(std::string(e.what()).find("duplicate key 'a'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace attnkit
