// The byte-level JSON matcher (text/json_grammar.h): exactly the texts of the schema and their
// prefixes are accepted, and unsupported schemas are refused by name.
#include "text/json_grammar.h"

#include <gtest/gtest.h>

#include <string>

#include "text/chat_request.h"

namespace cedar::text {
namespace {

// true when the whole text is accepted; *complete: it is a finished value
bool accepts(const SchemaNode* root, const std::string& s, bool* complete = nullptr) {
  JsonMatcher m(root);
  for (const char c : s)
    if (!m.feed(uint8_t(c))) return false;
  if (complete) *complete = m.done();
  return true;
}

TEST(JsonGrammar, AnyObjectAcceptsJsonObjectsAndTheirPrefixesOnly) {
  const JsonSchema s = JsonSchema::any_object();
  for (const std::string ok :
       {R"({})", R"({"a": 1, "b": [true, false, null, -0.5e+3, "x\n\u00e9é"], "c": {"d": []}})",
        " {\n  \"k\": \"v\"\n}", R"({"":0})", "{\"emoji\": \"\xF0\x9F\x98\x80\"}"}) {
    bool done = false;
    EXPECT_TRUE(accepts(s.root(), ok, &done)) << ok;
    EXPECT_TRUE(done) << ok;
    for (size_t i = 0; i + 1 < ok.size(); ++i) {
      bool d = true;
      EXPECT_TRUE(accepts(s.root(), ok.substr(0, i), &d)) << ok.substr(0, i);
      EXPECT_FALSE(d) << ok.substr(0, i);
    }
  }
  for (const std::string bad :
       {"[]", "\"x\"", "{,}", "{\"a\"}", "{\"a\":}", "{\"a\":1,}", "{\"a\":01}", "{\"a\":1.}",
        "{\"a\":tru", "{\"a\":\"\x01\"}", "{\"a\":\"\\x\"}", "{\"a\":\"\xC0\xAF\"}",
        "{\"a\":\"\xED\xA0\x80\"}", "{} ", "{}{}", "{\"a\":[1 2]}", "{\"a\":1e}"}) {
    bool done = false;
    const bool ok = accepts(s.root(), bad, &done);
    EXPECT_FALSE(ok && done) << bad;
    if (bad != "{\"a\":tru" && bad != "{\"a\":1e}") {
      EXPECT_FALSE(ok) << bad;
    }
  }
  // whitespace runs are bounded; nesting too
  EXPECT_FALSE(accepts(s.root(), "{" + std::string(JsonMatcher::kMaxWhitespace + 1, ' ')));
  EXPECT_TRUE(accepts(s.root(), "{\"a\":" + std::string(JsonMatcher::kMaxDepth - 1, '[')));
  EXPECT_FALSE(accepts(s.root(), "{\"a\":" + std::string(JsonMatcher::kMaxDepth, '[')));
}

TEST(JsonGrammar, SchemaPropertiesTypesRequiredAndEnums) {
  const JsonSchema s = JsonSchema::compile(ojson::parse(R"({
    "type": "object", "additionalProperties": false,
    "properties": {
      "name": {"type": "string", "description": "who"},
      "age": {"type": "integer"},
      "score": {"type": ["number", "null"]},
      "tags": {"type": "array", "items": {"enum": ["a", "ab", 3]}, "minItems": 1, "maxItems": 2},
      "ok": {"type": "boolean"}
    },
    "required": ["name", "ok"]})"),
                                           "schema");
  bool done = false;
  EXPECT_TRUE(accepts(s.root(), R"({"ok": true, "name": "x"})", &done));
  EXPECT_TRUE(done);
  EXPECT_TRUE(accepts(s.root(), R"({"name":"x","age":-12,"score":null,"tags":["ab",3],"ok":false})",
                      &done));
  EXPECT_TRUE(done);
  EXPECT_TRUE(accepts(s.root(), R"({"name":"x","score":2.5e-3,"ok":true})", &done));
  EXPECT_TRUE(done);
  for (const std::string bad : {
           R"({"name": "x"})",                             // ok is required: no '}' yet
           R"({"name": "x", "name": "y")",                 // a property twice
           R"({"nam": 1)", R"({"other": 1)",               // undeclared keys
           R"({"age": 1.5)", R"({"age": "1")",             // integer
           R"({"ok": 1)", R"({"score": "x")",              // types
           R"({"tags": [])", R"({"tags": ["a","a","a"])",  // minItems, maxItems
           R"({"tags": ["b"])", R"({"tags": [4])",         // enum
       }) {
    bool d = false;
    const bool ok = accepts(s.root(), bad, &d);
    EXPECT_FALSE(ok && d) << bad;
    if (bad != R"({"name": "x"})") {
      EXPECT_FALSE(ok) << bad;
    }
  }
  // a prefix that can still become valid
  EXPECT_TRUE(accepts(s.root(), R"({"name": "x")", &done));
  EXPECT_FALSE(done);
  EXPECT_FALSE(accepts(s.root(), R"({"name": "x"})"));  // closing before "ok"
}

TEST(JsonGrammar, UnsupportedSchemasAreRefusedByName) {
  for (const char* bad : {R"({"type": "object", "properties": {"a": {"$ref": "#/x"}}})",
                          R"({"anyOf": [{"type": "string"}]})", R"({"type": "string"})",
                          R"({"type": "object", "properties": {"a": {"type": "date"}}})",
                          R"({"type": "object", "properties": {"a": {"not": {"type": "null"}}}})",
                          R"({"type": "object", "required": ["zz"], "properties": {"a": {}},
                              "additionalProperties": false})"}) {
    try {
      JsonSchema::compile(ojson::parse(bad), "rf");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const RequestError& e) {
      EXPECT_EQ(e.param().substr(0, 2), "rf") << e.what();
    }
  }
}

}  // namespace
}  // namespace cedar::text
