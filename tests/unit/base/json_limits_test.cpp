// The depth check in front of every parse of untrusted JSON (text/json_limits.h).
#include "base/json_limits.h"

#include <gtest/gtest.h>

#include <string>

namespace cedar {
namespace {

std::string nested(int d, const char* open = "[", const char* close = "]") {
  std::string s;
  for (int i = 0; i < d; ++i) s += open;
  for (int i = 0; i < d; ++i) s += close;
  return s;
}

TEST(JsonLimits, DepthCountsBracketsOutsideStrings) {
  EXPECT_EQ(json_nesting_depth("1"), 0);
  EXPECT_EQ(json_nesting_depth("[]"), 1);
  EXPECT_EQ(json_nesting_depth(R"({"a":[1,{"b":[]}],"c":{}})"), 4);
  EXPECT_EQ(json_nesting_depth(R"(["[[[[", "\"[[[", "\\"])"), 1);  // brackets in strings
  EXPECT_EQ(json_nesting_depth(nested(100)), 100);
  EXPECT_EQ(json_nesting_depth(nested(100000), 128), 129);  // stops counting past the limit
  EXPECT_EQ(json_nesting_depth("]]]][[", 8), 2);            // invalid text: still bounded
}

TEST(JsonLimits, ParseRefusesDeepTextAndExplainsBadText) {
  std::string why;
  EXPECT_TRUE(parse_untrusted_json(nested(128), &why).is_array());
  EXPECT_TRUE(parse_untrusted_json(nested(129), &why).is_discarded());
  EXPECT_NE(why.find("nested deeper than 128 levels"), std::string::npos) << why;
  // the reported crash: a deep value followed by another key
  const std::string body = "{\"model\":" + nested(60000) + ",\"messages\":[]}";
  EXPECT_TRUE(parse_untrusted_json(body, &why).is_discarded());
  EXPECT_TRUE(parse_untrusted_json("{\"a\": [1, 2", &why).is_discarded());
  EXPECT_NE(why.find("parse error"), std::string::npos) << why;
  EXPECT_TRUE(parse_untrusted_json("[1e999]", &why).is_discarded());  // out of range, not a throw
  EXPECT_NE(why.find("overflow"), std::string::npos) << why;
  EXPECT_TRUE(parse_untrusted_json("").is_discarded());
}

}  // namespace
}  // namespace cedar
