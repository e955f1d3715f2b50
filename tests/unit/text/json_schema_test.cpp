// JSON Schema features of constrained decoding (text/json_schema.h, text/json_matcher.h), each
// fed byte by byte: every prefix of a valid text is accepted and the text completes; an invalid
// text is refused at some byte or does not complete. Unsupported or unsatisfiable schemas are
// a RequestError naming what and where; hostile ones are refused quickly.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "text/chat_request.h"
#include "text/json_grammar.h"

namespace cedar::text {
namespace {

// How many bytes of s the matcher takes; *complete: the text may end there.
size_t taken(const SchemaNode* root, const std::string& s, bool* complete) {
  JsonMatcher m(root);
  size_t n = 0;
  while (n < s.size() && m.feed(uint8_t(s[n]))) ++n;
  *complete = n == s.size() && m.can_end();
  return n;
}

struct Case {
  const char* schema;
  std::vector<std::string> valid, invalid;
};

void check(const Case& c) {
  SCOPED_TRACE(c.schema);
  const JsonSchema s = JsonSchema::compile_value(ojson::parse(c.schema), "s");
  for (const auto& v : c.valid) {
    bool complete = false;
    EXPECT_EQ(taken(s.root(), v, &complete), v.size()) << "valid text refused: " << v;
    EXPECT_TRUE(complete) << "valid text incomplete: " << v;
  }
  for (const auto& v : c.invalid) {
    bool complete = false;
    taken(s.root(), v, &complete);
    EXPECT_FALSE(complete) << "invalid text accepted: " << v;
  }
}

// The schema is refused; the message holds `what` and the param starts with `where`.
void refused(const char* schema, const std::string& what, const std::string& where = "s") {
  try {
    JsonSchema::compile_value(ojson::parse(schema), "s");
    ADD_FAILURE() << schema << " was accepted";
  } catch (const RequestError& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << schema << ": " << e.what();
    EXPECT_EQ(e.param().substr(0, where.size()), where) << schema << ": " << e.param();
  }
}

TEST(JsonSchema, RefsToPointersInTheDocument) {
  check({R"({"$defs": {"pos": {"type": "integer", "minimum": 0}}, "type": "object",
             "properties": {"a": {"$ref": "#/$defs/pos"}}})",
         {R"({"a":3})", R"({})"},
         {R"({"a":-1})", R"({"a":"x"})"}});
  check({R"({"definitions": {"a/b": {"const": 1}, "c~d": {"const": 2}, "e f": {"const": 3}},
             "type": "array", "prefixItems": [{"$ref": "#/definitions/a~1b"},
             {"$ref": "#/definitions/c~0d"}, {"$ref": "#/definitions/e%20f"}], "items": false})",
         {"[1,2,3]", "[1]", "[]"},
         {"[1,2,4]", "[1,2,3,4]", "[2]"}});
  check(
      {R"({"type": "object", "properties": {"x": {"type": "string"}, "y": {"$ref": "#/properties/x"},
             "z": {"$ref": "#/allOf/0"}}, "allOf": [{"type": ["null", "object"]}]})",
       {R"({"y":"s","z":null})"},
       {R"({"y":1})", R"({"z":"s"})"}});
  // $ref beside other keywords: both apply (draft 2019+)
  check({R"({"$defs": {"s": {"type": "string"}}, "type": "object",
             "properties": {"a": {"$ref": "#/$defs/s", "maxLength": 2}}})",
         {R"({"a":"ab"})"},
         {R"({"a":"abc"})", R"({"a":1})"}});
  refused(R"({"$ref": "https://example.com/s.json"})", "not followed");
  refused(R"({"$ref": "#foo"})", "anchors");
  refused(R"({"$ref": "#/$defs/missing"})", "does not resolve");
  refused(R"({"$ref": "#/items", "$defs": {"x": {"$id": "http://a/b", "$ref": "#"}}})", "$id");
}

TEST(JsonSchema, RecursiveSchemasAreFollowedToTheDepthBound) {
  const char* tree = R"({"type": "object", "additionalProperties": false, "required": ["v"],
      "properties": {"v": {"type": "integer"}, "kids": {"type": "array", "items": {"$ref": "#"}}}})";
  check({tree,
         {R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[]}]})", R"({"kids":[],"v":0})"},
         {R"({"v":1,"kids":[{}]})", R"({"v":1,"kids":[{"v":"x"}]})"}});
  // deeper than kMaxDepth: the recursion stops where the text could still close
  const JsonSchema s = JsonSchema::compile_value(ojson::parse(tree), "s");
  std::string deep = "{\"v\":0";
  int depth = 1;
  while (depth + 2 <= JsonMatcher::kMaxDepth) deep += ",\"kids\":[{\"v\":0", depth += 2;
  bool complete = false;
  EXPECT_EQ(taken(s.root(), deep, &complete), deep.size());
  EXPECT_LT(taken(s.root(), deep + ",\"kids\":[{", &complete), deep.size() + 10);
  // a linked list through anyOf with null
  check({R"({"$defs": {"n": {"type": "object", "required": ["next"],
             "properties": {"next": {"anyOf": [{"$ref": "#/$defs/n"}, {"type": "null"}]}}}},
             "$ref": "#/$defs/n"})",
         {R"({"next":{"next":null}})"},
         {R"({"next":{}})", R"({})"}});
  // no base case: no finite value
  refused(R"({"type": "object", "properties": {"a": {"$ref": "#"}}, "required": ["a"]})",
          "admits no value");
  refused(R"({"$ref": "#"})", "cycle");
  refused(R"({"allOf": [{"$ref": "#"}]})", "cycle");
  refused(R"({"anyOf": [{"$ref": "#"}, {"type": "string"}]})", "cycle");
}

TEST(JsonSchema, AnyOfKeepsEveryReadingAlive) {
  check({R"({"anyOf": [{"type": "string", "maxLength": 2}, {"type": "integer", "minimum": 10}]})",
         {"\"ab\"", "10", "99"},
         {"\"abc\"", "9", "1.5", "null"}});
  check({R"({"anyOf": [
      {"type": "object", "additionalProperties": false, "required": ["k", "x"],
       "properties": {"k": {"const": "a"}, "x": {"type": "integer"}}},
      {"type": "object", "additionalProperties": false, "required": ["k", "y"],
       "properties": {"k": {"const": "b"}, "y": {"type": "string"}}}]})",
         {R"({"k":"a","x":1})", R"({"y":"s","k":"b"})"},
         {R"({"k":"a","y":"s"})", R"({"k":"b","x":1})", R"({"k":"a"})"}});
  // nested: both readings of the inner value stay alive under both outer ones
  check(
      {R"({"anyOf": [{"type": "array", "items": {"anyOf": [{"type": "integer"}, {"type": "string"}]}},
                       {"type": "array", "items": {"type": "boolean"}, "maxItems": 1}]})",
       {"[1,\"a\",2]", "[true]", "[]"},
       {"[true,false]", "[1,true]"}});
}

TEST(JsonSchema, OneOfOnlyWhereTheBranchesExcludeEachOther) {
  check({R"({"oneOf": [{"type": "string"}, {"type": "integer"}]})", {"\"x\"", "3"}, {"null"}});
  check({R"({"$defs": {
      "cat": {"type": "object", "properties": {"t": {"const": "cat"}, "lives": {"type": "integer"}},
              "required": ["t"]},
      "dog": {"type": "object", "properties": {"t": {"enum": ["dog", "puppy"]}, "bark": {"type": "boolean"}},
              "required": ["t"]}},
      "oneOf": [{"$ref": "#/$defs/cat"}, {"$ref": "#/$defs/dog"}]})",
         {R"({"t":"cat","lives":9})", R"({"bark":true,"t":"puppy"})"},
         {R"({"t":"cow"})"}});
  check(
      {R"({"oneOf": [{"type": "integer", "maximum": 0}, {"type": "integer", "exclusiveMinimum": 0}]})",
       {"0", "5", "-3"},
       {"1.5"}});
  refused(R"({"oneOf": [{"type": "string"}, {"type": "string", "maxLength": 3}]})", "oneOf",
          "s.oneOf");
  refused(R"({"oneOf": [{"type": "number"}, {"type": "integer"}]})", "anyOf may be what is meant");
}

TEST(JsonSchema, AllOfMergesExactly) {
  check(
      {R"({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                       {"properties": {"b": {"type": "string"}}, "required": ["b"]}]})",
       {R"({"a":1,"b":"x"})"},
       {R"({"a":1})", R"({"a":1,"b":2})"}});
  // additionalProperties of one conjunct forbids the other's property
  check({R"({"type": "object", "allOf": [{"properties": {"a": {}}, "additionalProperties": false},
                                         {"properties": {"b": {}}}]})",
         {R"({"a":1})", "{}"},
         {R"({"b":1})"}});
  refused(R"({"type": "object", "allOf": [{"properties": {"a": {}}, "additionalProperties": false},
                                          {"required": ["b"]}]})",
          "\"b\"");
  check({R"({"type": "integer", "allOf": [{"minimum": 5}, {"maximum": 7}]})",
         {"5", "6", "7"},
         {"4", "8"}});
  check({R"({"type": "string", "allOf": [{"pattern": "^a"}, {"pattern": "b$"}]})",
         {"\"ab\"", "\"axb\""},
         {"\"ba\"", "\"a\""}});
  check({R"({"allOf": [{"type": ["string", "integer"]}, {"type": ["integer", "null"]}]})",
         {"3"},
         {"\"x\"", "null"}});
  // allOf over anyOf distributes
  check({R"({"allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]},
                       {"anyOf": [{"type": "integer", "minimum": 3}, {"type": "string", "maxLength": 1}]}]})",
         {"3", "\"a\""},
         {"\"ab\"", "1"}});
  // a long allOf folds without nesting
  ojson many = ojson::array();
  for (int i = 0; i < 300; ++i)
    many.push_back({{"properties", {{"p" + std::to_string(i), {{"type", "integer"}}}}}});
  const JsonSchema wide =
      JsonSchema::compile_value(ojson{{"type", "object"}, {"allOf", many}}, "s");
  bool complete = false;
  EXPECT_EQ(taken(wide.root(), R"({"p7":1,"p299":2})", &complete), 17u);
  EXPECT_TRUE(complete);
  EXPECT_LT(taken(wide.root(), R"({"p7":"x"})", &complete), 10u);
  // merged items and enums
  check(
      {R"({"allOf": [{"type": "array", "items": {"enum": [1, 2, 3]}}, {"items": {"enum": [2, 3, 4]}}]})",
       {"[2,3]"},
       {"[1]", "[4]"}});
}

TEST(JsonSchema, TypesNullableEnumAndConstOfAnyValue) {
  check({R"({"type": "string", "nullable": true})", {"\"x\"", "null"}, {"1"}});
  check({R"({"enum": [{"a": [1, 2]}, [true, null], "x", 1.5, null]})",
         {R"({"a":[1,2]})", R"({ "a" : [ 1 , 2 ] })", "[true,null]", "\"x\"", "1.5", "null"},
         {R"({"a":[1]})", R"({"a":[1,2],"b":1})", "[true]", "1", "\"y\"", "1.55"}});
  check({R"({"const": {"k": "v", "n": {"m": []}}})",
         {R"({"n":{"m":[]},"k":"v"})"},
         {R"({"k":"v"})", R"({"k":"v","n":{"m":[0]}})"}});
  check({R"({"type": "string", "enum": ["a", "ab", "b", 3]})",
         {"\"a\"", "\"ab\"", "\"\\u0061\""},
         {"3", "\"c\""}});
  // no cap on enum sizes
  ojson big = ojson::array();
  for (int i = 0; i < 3000; ++i) big.push_back("v" + std::to_string(i * 7));
  const JsonSchema s = JsonSchema::compile_value(ojson{{"enum", big}}, "s");
  bool complete = false;
  for (int i = 0; i < 3000; i += 97) {
    const std::string t = "\"v" + std::to_string(i * 7) + "\"";
    EXPECT_EQ(taken(s.root(), t, &complete), t.size());
    EXPECT_TRUE(complete) << t;
  }
  taken(s.root(), "\"v8\"", &complete);
  EXPECT_FALSE(complete);
}

TEST(JsonSchema, ObjectKeywords) {
  const char* typed_extra = R"({"type": "object", "properties": {"a": {"type": "integer"}},
                               "additionalProperties": {"type": "string"}})";
  // a free key spelled like a declared name is that name: its schema, and only once
  check({typed_extra,
         {R"({"a":1,"b":"x"})", R"({"\u0061":2})"},
         {R"({"a":"x"})", R"({"b":1})", R"({"\u0061":"x"})", R"({"a":1,"a":2})"}});
  // a property whose schema is false is no free key either
  check({R"({"type": "object", "properties": {"a": false}, "additionalProperties": true})",
         {R"({"b":1})"},
         {R"({"a":1})", R"({"\u0061":1})"}});
  check({R"({"type": "object", "additionalProperties": {"type": "integer"}})",
         {R"({"x":1,"y":2})", "{}"},
         {R"({"x":"s"})"}});
  check({R"({"type": "object", "properties": {"a": {}}, "required": ["zz"]})",
         {R"({"zz":[1]})"},
         {R"({"a":1})"}});
  refused(R"({"type": "object", "properties": {"a": {}}, "required": ["zz"],
              "additionalProperties": false})",
          "\"zz\"");
  check(
      {R"({"type": "object", "patternProperties": {"^x_": {"type": "integer"}, "^y_": {"type": "string"}},
             "additionalProperties": false})",
       {R"({"x_a":1,"y_b":"s"})"},
       {R"({"x_a":"s"})", R"({"z":1})"}});
  check(
      {R"({"type": "object", "patternProperties": {"a": {"type": "integer"}, "b": {"minimum": 3}}})",
       {R"({"ab":3,"b":4.5,"a":-1})"},
       {R"({"ab":2})", R"({"ab":3.5})"}});
  check({R"({"type": "object", "minProperties": 2, "maxProperties": 3})",
         {R"({"a":1,"b":2})", R"({"a":1,"b":2,"c":3})"},
         {R"({"a":1})", R"({"a":1,"a":2})", R"({"a":1,"b":2,"c":3,"d":4})"}});
  check({R"({"type": "object", "properties": {"a": {}, "b": {}, "c": {}}, "maxProperties": 1,
             "required": ["c"]})",
         {R"({"c":1})"},
         {R"({"a":1,"c":1})", R"({"a":1})"}});
  check({R"({"type": "object", "propertyNames": {"pattern": "^[a-z]+$", "maxLength": 3}})",
         {R"({"abc":1})"},
         {R"({"abcd":1})", R"({"A":1})"}});
  check(
      {R"({"type": "object", "propertyNames": {"enum": ["x", "y"]}, "properties": {"x": {"type": "integer"}}})",
       {R"({"x":1})", "{}"},
       {R"({"z":1})", R"({"x":"s"})"}});
  check({R"({"type": "object", "propertyNames": false})", {"{}"}, {R"({"a":1})"}});
}

TEST(JsonSchema, ArrayKeywords) {
  check(
      {R"({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": false})",
       {"[1,\"a\"]", "[1]", "[]"},
       {"[1,2]", "[1,\"a\",3]"}});
  check(
      {R"({"type": "array", "items": [{"type": "integer"}], "additionalItems": {"type": "string"}})",
       {"[1,\"a\",\"b\"]"},
       {"[1,2]", "[\"a\"]"}});
  check({R"({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 3})",
         {"[1,2]", "[1,2,3]"},
         {"[1]", "[1,2,3,4]", "[]"}});
  check({R"({"type": "array", "uniqueItems": true, "maxItems": 1})", {"[]", "[{}]"}, {"[1,1]"}});
  refused(R"({"type": "array", "uniqueItems": true})", "uniqueItems");
  refused(R"({"type": "array", "minItems": -1})", "non-negative integer");
  refused(R"({"type": "array", "minItems": 1.5})", "non-negative integer");
  refused(R"({"type": "array", "minItems": 9223372036854775808})", "beyond what any answer");
  refused(R"({"type": "string", "minLength": 10000000})", "beyond what any answer");
  refused(R"({"type": "array", "minItems": 3, "maxItems": 2})", "minItems is larger");
}

TEST(JsonSchema, StringLengthsPatternsAndFormats) {
  check({R"({"type": "string", "minLength": 2, "maxLength": 3})",
         {"\"ab\"", "\"\xC3\xA9\xC3\xA9\"", "\"\\u00e9x\"", "\"\\ud83d\\ude00x\""},
         {"\"a\"", "\"abcd\"", "\"\xC3\xA9\xC3\xA9\xC3\xA9\xC3\xA9\"", "\"\\ud83d\""}});
  check({R"({"type": "string", "pattern": "\\d{3}"})", {"\"a123b\"", "\"123\""}, {"\"12a3\""}});
  check({R"({"type": "string", "pattern": "^a.c$"})",
         {"\"abc\"",
          "\"a\xC3\xA9"
          "c\""},
         {"\"abcd\"", "\"a\\nc\""}});
  check({R"({"type": "string", "pattern": "^a\nb\"$"})",
         {"\"a\\nb\\\"\"", "\"a\\u000ab\\u0022\""},
         {"\"ab\\\"\""}});
  check({R"({"type": "string", "pattern": "^[^a-c]+$"})", {"\"xyz\""}, {"\"xaz\"", "\"\""}});
  check({R"({"type": "string", "pattern": "^(?:ab|cd){2,3}?$"})",
         {"\"abcd\"", "\"ababab\""},
         {"\"ab\"", "\"abababab\""}});
  check({R"({"type": "string", "pattern": "^\\w+\\s\\W$"})", {"\"a_1 !\""}, {"\"a_1 b\""}});
  refused(R"({"type": "string", "pattern": "(a)\\1"})", "backreferences");
  refused(R"js({"type": "string", "pattern": "a(?=b)"})js", "lookaround");
  refused(R"({"type": "string", "pattern": "\\bword"})", "word boundaries");
  refused(R"({"type": "string", "pattern": "(a|b)*a(a|b){14}"})", "automaton states", "s.pattern");
  refused(R"({"type": "string", "pattern": "a{2000}"})", "repetition bound");
  refused(R"({"type": "string", "pattern": "(a"})", "unterminated group");
  check({R"({"type": "string", "format": "date-time"})",
         {"\"2024-01-31T10:20:30Z\"", "\"2024-02-28T00:00:00.5+01:00\""},
         {"\"2024-02-30T00:00:00Z\"", "\"2024-01-31 10:20:30Z\"", "\"2024-01-31T24:00:00Z\""}});
  check({R"({"type": "string", "format": "date"})", {"\"1999-12-31\""}, {"\"1999-13-01\""}});
  check({R"({"type": "string", "format": "time"})", {"\"23:59:59-05:30\""}, {"\"23:59:59\""}});
  check({R"({"type": "string", "format": "email"})",
         {"\"joe.bloggs@example.com\""},
         {"\"2962\"", "\"a@b\"", "\".a@b.co\""}});
  check({R"({"type": "string", "format": "ipv4"})",
         {"\"192.168.0.1\""},
         {"\"127.0.0.0.1\"", "\"256.0.0.1\""}});
  check({R"({"type": "string", "format": "ipv6"})",
         {"\"::1\"", "\"fe80::1:2\"", "\"1:2:3:4:5:6:7:8\""},
         {"\"12345::\"", "\"1:2:3:4:5:6:7:8:9\"", "\"1::2::3\""}});
  check({R"({"type": "string", "format": "uuid"})",
         {"\"123e4567-e89b-12d3-a456-426614174000\""},
         {"\"123e4567e89b12d3a456426614174000\""}});
  check({R"({"type": "string", "format": "uri"})",
         {"\"https://example.com/a?b=c#d\""},
         {"\"abc\"", "\"//foo.bar/\""}});
  check({R"({"type": "string", "format": "hostname"})", {"\"a-b.example\""}, {"\"-a.b\""}});
  check({R"({"type": "string", "format": "banana"})", {"\"anything\""}, {"1"}});
  // format applies to strings only
  check({R"({"format": "date"})", {"3", "\"2020-01-01\""}, {"\"x\""}});
}

TEST(JsonSchema, NumberBoundsDigitByDigit) {
  check({R"({"type": "number", "minimum": -1.5, "maximum": 2})",
         {"-1.5", "0", "1.99", "2", "-0.5", "2.000"},
         {"-1.6", "2.01", "3", "1e0", "-1.50001"}});
  check({R"({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1})",
         {"0.5", "0.000001"},
         {"0", "1", "-0", "0.0"}});
  check({R"({"type": "integer", "minimum": 0, "exclusiveMinimum": true, "maximum": 10})",
         {"1", "10"},
         {"0", "11"}});
  check({R"({"type": "integer", "multipleOf": 7, "minimum": 10, "maximum": 30})",
         {"14", "21", "28"},
         {"7", "15", "35"}});
  check({R"({"type": "number", "multipleOf": 3})", {"-9", "0", "300"}, {"1", "1.5", "3.0"}});
  refused(R"({"type": "number", "multipleOf": 0.5})", "multipleOf");
  check({R"({"type": "integer"})", {"-0", "123456789012345678"}, {"1.0", "1e3", "01"}});
  check({R"({"type": "integer", "minimum": 1, "maximum": 6, "enum": [0, 2, 4, 8, 2.5]})",
         {"2", "4"},
         {"0", "8", "2.5"}});
  // the prefix is refused as soon as no completion fits
  const JsonSchema s = JsonSchema::compile_value(
      ojson::parse(R"({"type": "integer", "minimum": 100, "maximum": 199})"), "s");
  bool complete = false;
  EXPECT_EQ(taken(s.root(), "2", &complete), 0u);
  EXPECT_EQ(taken(s.root(), "-", &complete), 0u);
  EXPECT_EQ(taken(s.root(), "1000", &complete), 3u);
  EXPECT_EQ(taken(s.root(), "10", &complete), 2u);
  EXPECT_FALSE(complete);
  refused(R"({"type": "integer", "minimum": 3, "maximum": 2})", "no number");
}

TEST(JsonSchema, AssertionsItCannotEnforceAreRefusedByKeywordAndPath) {
  for (const char* kw : {R"("not": {"type": "string"})", R"("if": {}, "then": {})",
                         R"("dependencies": {"a": ["b"]})", R"("dependentRequired": {"a": ["b"]})",
                         R"("contains": {})", R"("unevaluatedProperties": false)"}) {
    const std::string schema =
        std::string(R"({"type": "object", "properties": {"a": {)") + kw + "}}}";
    const std::string name = std::string(kw).substr(1, std::string(kw).find('"', 1) - 1);
    refused(schema.c_str(), "\"" + name + "\" is not supported", "s.properties.a");
  }
  // annotations and unknown keywords are ignored, as JSON Schema ignores them
  check({R"({"type": "object", "title": "t", "description": "d", "default": {}, "examples": [1],
             "$schema": "x", "$id": "urn:x", "$comment": "c", "deprecated": true, "readOnly": true,
             "writeOnly": false, "contentMediaType": "text/plain", "discriminator": {"propertyName": "k"},
             "x-vendor": 1, "banana": {"not": 1}, "if": {"type": "string"},
             "dependencies": {}, "unevaluatedItems": true, "properties": {"a": {"type": "integer"}}})",
         {R"({"a":1})"},
         {R"({"a":"x"})"}});
}

TEST(JsonSchema, HostileSchemasAreRefusedQuickly) {
  // deep nesting in the document: compiled lazily, the answer's depth bounds it
  std::string deep = R"({"type": "string"})";
  for (int i = 0; i < 3000; ++i) deep = R"({"type": "object", "properties": {"a": )" + deep + "}}";
  const JsonSchema s = JsonSchema::compile_value(ojson::parse(deep), "s");
  bool complete = false;
  EXPECT_EQ(taken(s.root(), "{}", &complete), 2u);
  EXPECT_TRUE(complete);
  // allOf over many anyOf: the expansion is bounded
  ojson all = ojson::array();
  for (int i = 0; i < 12; ++i)
    all.push_back(
        ojson::parse(R"({"anyOf": [{"minimum": 1}, {"maximum": 5}, {"multipleOf": 2}]})"));
  refused(ojson{{"allOf", all}}.dump().c_str(), "alternatives");
  // enum bytes are bounded
  ojson big = ojson::array();
  for (int i = 0; i < 20000; ++i) big.push_back(std::string(64, 'a') + std::to_string(i));
  refused(ojson{{"enum", big}}.dump().c_str(), "bytes");
  // mutually recursive conjunctions terminate
  JsonSchema::compile_value(ojson::parse(R"({"$defs": {
      "a": {"properties": {"x": {"$ref": "#/$defs/b"}}, "allOf": [{"$ref": "#/$defs/b"}]},
      "b": {"properties": {"x": {"$ref": "#/$defs/a"}, "y": {"type": "integer"}}}},
      "$ref": "#/$defs/a"})"),
                            "s");
  refused(R"({"allOf": [{"allOf": [{"$ref": "#/allOf/0"}]}]})", "cycle");
  // many patterns on one object's keys: one automaton, bounded
  ojson pats = ojson::object();
  for (int i = 0; i < 40; ++i)
    pats["^[ax]*x[ax]{" + std::to_string(i) + "}$"] = ojson::object();
  refused(ojson{{"type", "object"}, {"patternProperties", pats}}.dump().c_str(), "states");
}

TEST(JsonSchema, PastItsCapacityTheMatcherNarrowsNeverWidens) {
  ojson alts = ojson::array();
  for (int i = 0; i < 40; ++i) alts.push_back({{"const", "v" + std::to_string(i)}, {"title", i}});
  const JsonSchema s = JsonSchema::compile_value(ojson{{"anyOf", alts}}, "s");
  bool complete = false;
  for (int i = 0; i < JsonMatcher::kMaxValues; ++i) {
    const std::string t = "\"v" + std::to_string(i) + "\"";
    EXPECT_EQ(taken(s.root(), t, &complete), t.size());
    EXPECT_TRUE(complete) << t;
  }
  for (const std::string bad : {"\"v40\"", "\"w\"", "1"}) {
    taken(s.root(), bad, &complete);
    EXPECT_FALSE(complete) << bad;
  }
}

TEST(JsonSchema, KeysAreQuantisedSoMasksStayCacheable) {
  const JsonSchema s = JsonSchema::compile_value(
      ojson::parse(
          R"({"type": "object", "properties": {"a": {"type": "string", "maxLength": 1000}}})"),
      "s");
  JsonMatcher m(s.root());
  ASSERT_TRUE(m.feed(std::string_view("{\"a\":\"0123456789")));
  const std::string k10 = m.key();
  ASSERT_TRUE(m.feed(uint8_t('x')));
  EXPECT_EQ(m.key(), k10);  // 10 and 11 characters: no token tells them apart
  ASSERT_TRUE(m.feed(std::string(980, 'y')));
  const std::string k991 = m.key();
  ASSERT_TRUE(m.feed(uint8_t('z')));
  EXPECT_NE(m.key(), k991);  // near maxLength the count matters
  // array counts likewise
  const JsonSchema a = JsonSchema::compile_value(
      ojson::parse(R"({"type": "array", "items": {"type": "integer"}, "minItems": 2})"), "s");
  JsonMatcher n(a.root());
  ASSERT_TRUE(n.feed(std::string_view("[1,2,3,")));
  const std::string k3 = n.key();
  ASSERT_TRUE(n.feed(std::string_view("4,")));
  EXPECT_EQ(n.key(), k3);
}

}  // namespace
}  // namespace cedar::text
