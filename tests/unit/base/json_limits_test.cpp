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

std::string object_of(size_t keys, size_t key_bytes = 0) {
  std::string s = "{";
  for (size_t i = 0; i < keys; ++i) {
    std::string k = std::to_string(i);
    if (k.size() < key_bytes) k.insert(0, key_bytes - k.size(), 'k');
    s += (i ? ",\"" : "\"") + k + "\":1";
  }
  return s + "}";
}

TEST(JsonLimits, ObjectsWithTooManyKeysAreRefusedNamingThePath) {
  std::string why;
  const std::string at_limit = "{\"model\":\"m\",\"logit_bias\":" + object_of(1024) + "}";
  EXPECT_TRUE(parse_untrusted_json(at_limit, &why).is_object()) << why;
  const std::string over = "{\"model\":\"m\",\"logit_bias\":" + object_of(1025) + "}";
  EXPECT_TRUE(parse_untrusted_json(over, &why).is_discarded());
  EXPECT_EQ(why, "a JSON object in `logit_bias` has more than 1024 keys");
  const std::string deep = R"({"tools":[{"parameters":{"properties":)" + object_of(100000) + "}}]}";
  EXPECT_TRUE(parse_untrusted_json(deep, &why).is_discarded());
  EXPECT_EQ(why, "a JSON object in `tools[].parameters.properties` has more than 1024 keys");
  EXPECT_TRUE(parse_untrusted_json(object_of(2000), &why).is_discarded());
  EXPECT_EQ(why, "a JSON object in the top level has more than 1024 keys");
  // keys inside strings and arrays of many values do not count
  std::string many = "[0";
  for (int i = 0; i < 5000; ++i) many += ",{\"a\":1}";
  EXPECT_TRUE(parse_untrusted_json(many + "]", &why).is_array()) << why;
  EXPECT_TRUE(parse_untrusted_json(R"({"a":")" + std::string(3000, ':') + "\"}", &why).is_object());
}

TEST(JsonLimits, LongKeysAreRefused) {
  std::string why;
  EXPECT_TRUE(parse_untrusted_json(object_of(4, 1024), &why).is_object()) << why;
  EXPECT_TRUE(parse_untrusted_json(object_of(4, 1025), &why).is_discarded());
  EXPECT_EQ(why, "a JSON object key in the top level is longer than 1024 bytes");
  // a long string value is not a key
  EXPECT_TRUE(parse_untrusted_json(R"({"a":")" + std::string(5000, 'x') + "\"}", &why).is_object());
}

}  // namespace
}  // namespace cedar
