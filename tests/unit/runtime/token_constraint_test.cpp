// Constrained decoding over the real V4.1 vocabulary: sampling from random logits through the
// mask gives, every time, a valid JSON prefix that the schema still allows, and a stop token
// only after a complete value, which then parses (nlohmann) and validates against the schema
// (checked here independently of the matcher).
#include "runtime/token_constraint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include "constraint_test_util.h"
#include "text/output_parser.h"

namespace cedar::runtime {
namespace {

using testing::kEos;
using testing::sample;
using testing::Sampled;
using testing::tokenizer;
using text::ojson;

// The schema of the test, checked by hand: {"ok": bool, "color": "red"|"green", "n"?: integer}
bool valid_record(const ojson& v) {
  if (!v.is_object() || !v.contains("ok") || !v.contains("color")) return false;
  for (const auto& [k, x] : v.items()) {
    if (k == "ok" && !x.is_boolean()) return false;
    if (k == "color" && !(x == "red" || x == "green")) return false;
    if (k == "n" && !x.is_number_integer()) return false;
    if (k != "ok" && k != "color" && k != "n") return false;
  }
  return true;
}

TEST(JsonConstraint, RandomLogitsGiveValidJsonAndSchemaValues) {
  const TokenTrie trie(tokenizer());
  const text::JsonSchema any = text::JsonSchema::any_object();
  const text::JsonSchema rec = text::JsonSchema::compile(ojson::parse(R"({
      "type": "object", "additionalProperties": false, "required": ["ok", "color"],
      "properties": {"ok": {"type": "boolean"}, "color": {"enum": ["red", "green"]},
                     "n": {"type": "integer"}}})"),
                                                         "schema");
  int complete = 0;
  for (unsigned seed = 1; seed <= 6; ++seed) {
    for (const text::JsonSchema* s : {&any, &rec}) {
      JsonConstraint c(trie, tokenizer(), text::JsonMatcher(s->root()), {kEos});
      const Sampled r = sample(trie, c, seed, 160);
      text::JsonMatcher m(s->root());  // a fresh matcher: the text is a prefix it allows
      EXPECT_TRUE(m.feed(r.text)) << r.text;
      if (!r.stopped) continue;
      ++complete;
      const ojson v = ojson::parse(r.text, nullptr, /*allow_exceptions=*/false);
      ASSERT_FALSE(v.is_discarded()) << r.text;
      EXPECT_TRUE(v.is_object()) << r.text;
      if (s == &rec) {
        EXPECT_TRUE(valid_record(v)) << v.dump();
      }
    }
  }
  std::printf("[ info ] %d of 12 random-logit runs completed a value within 160 tokens\n",
              complete);
}

TEST(JsonConstraint, AStopTokenIsOnlyAllowedAfterACompleteValue) {
  const TokenTrie trie(tokenizer());
  const text::JsonSchema any = text::JsonSchema::any_object();
  JsonConstraint c(trie, tokenizer(), text::JsonMatcher(any.root()), {kEos});
  std::vector<float> logits(size_t(trie.vocab_size()), 0.0f);
  c.mask(logits);
  EXPECT_TRUE(std::isinf(logits[1]));  // nothing written yet
  const auto brace = tokenizer().encode("{}");
  for (const int32_t id : brace) c.accept(id);
  ASSERT_TRUE(c.complete());
  std::fill(logits.begin(), logits.end(), 0.5f);
  c.mask(logits);
  EXPECT_EQ(logits[1], 0.5f);  // the stop token keeps its logit
  size_t finite = 0;
  for (const float l : logits) finite += std::isfinite(l);
  EXPECT_EQ(finite, 1u);  // and nothing else is allowed
}

// Sampling pushed towards tokens that close strings and containers, and towards the end, so that
// answers finish.
Sampled sample_pushed(const TokenTrie& trie, TokenConstraint& c, unsigned seed, int max_tokens) {
  std::vector<float> push(size_t(trie.vocab_size()), 0.0f);
  std::string b;
  for (int32_t id = 0; id < trie.vocab_size(); ++id) {
    b.clear();
    if (!tokenizer().is_added(id)) tokenizer().append_token_bytes(id, &b);
    push[size_t(id)] = b.find('"') != std::string::npos              ? 3.0f
                       : b.find_first_of("]},") != std::string::npos ? 1.5f
                                                                     : 0.0f;
  }
  push[kEos] += 4.0f;
  return sample(trie, c, seed, max_tokens, push);
}

// $ref + $defs, anyOf with null, enum, pattern, format, number bounds and multipleOf, arrays with
// bounds: every complete answer is checked here by hand (std::regex, ranges), not by the matcher.
TEST(JsonConstraint, RandomLogitsOverARicherSchemaGiveValidValues) {
  const TokenTrie trie(tokenizer());
  const text::JsonSchema s = text::JsonSchema::compile(ojson::parse(R"({
      "$defs": {"code": {"type": "string", "pattern": "^[A-Z]{2}-\\d{2,4}$"}},
      "type": "object", "additionalProperties": false, "required": ["id", "qty", "tags"],
      "properties": {"id": {"$ref": "#/$defs/code"}, "qty": {"type": "integer", "minimum": 10,
        "maximum": 990, "multipleOf": 5}, "kind": {"anyOf": [{"enum": ["a", "bb"]}, {"type": "null"}]},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 3}, "minItems": 1, "maxItems": 2},
        "day": {"type": "string", "format": "date"}}})"),
                                                       "schema");
  const std::regex code("^[A-Z]{2}-[0-9]{2,4}$"), date("^[0-9]{4}-[0-9]{2}-[0-9]{2}$");
  int complete = 0;
  for (unsigned seed = 1; seed <= 8; ++seed) {
    JsonConstraint c(trie, tokenizer(), text::JsonMatcher(s.root()), {kEos});
    const Sampled r = sample_pushed(trie, c, seed, 120);
    text::JsonMatcher m(s.root());
    EXPECT_TRUE(m.feed(r.text)) << r.text;
    if (!r.stopped) continue;
    ++complete;
    const ojson v = ojson::parse(r.text, nullptr, false);
    ASSERT_TRUE(v.is_object()) << r.text;
    EXPECT_TRUE(std::regex_match(v.at("id").get<std::string>(), code)) << r.text;
    const int64_t q = v.at("qty").get<int64_t>();
    EXPECT_TRUE(q >= 10 && q <= 990 && q % 5 == 0) << r.text;
    const ojson& tags = v.at("tags");
    EXPECT_TRUE(tags.size() >= 1 && tags.size() <= 2) << r.text;
    if (v.contains("kind")) {
      EXPECT_TRUE(v["kind"].is_null() || v["kind"] == "a" || v["kind"] == "bb") << r.text;
    }
    if (v.contains("day")) {
      EXPECT_TRUE(std::regex_match(v["day"].get<std::string>(), date)) << r.text;
    }
    for (const auto& [k, x] : v.items())
      EXPECT_TRUE(k == "id" || k == "qty" || k == "kind" || k == "tags" || k == "day") << r.text;
  }
  std::printf("[ info ] %d of 8 random-logit runs completed a value within 120 tokens\n", complete);
  EXPECT_GE(complete, 1);
}

// The mask of a state is a function of its key: string lengths that no token can tell apart
// share one (cached) mask, lengths near maxLength do not.
std::vector<bool> allowed_after(const TokenTrie& trie, const text::JsonSchema& s,
                                const std::string& prefix) {
  JsonConstraint c(trie, tokenizer(), text::JsonMatcher(s.root()), {kEos});
  for (const int32_t id : tokenizer().encode(prefix)) c.accept(id);
  std::vector<float> logits(size_t(trie.vocab_size()), 0.0f);
  c.mask(logits);
  std::vector<bool> ok(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) ok[i] = std::isfinite(logits[i]);
  return ok;
}

TEST(JsonConstraint, CountersNoTokenCanTellApartShareAMask) {
  const TokenTrie trie(tokenizer());
  uint32_t longest = 0;  // key() clips counters past kKeyClip: no token may be longer
  std::string b;
  for (int32_t id = 0; id < trie.vocab_size(); ++id) {
    if (tokenizer().is_added(id)) continue;
    b.clear();
    tokenizer().append_token_bytes(id, &b);
    longest = std::max<uint32_t>(longest, uint32_t(b.size()));
  }
  EXPECT_LT(longest, text::kKeyClip);
  auto schema = [](int max) {
    return text::JsonSchema::compile(
        ojson::parse(R"({"type": "object", "properties": {"s": {"type": "string", "maxLength": )" +
                     std::to_string(max) + "}}}"),
        "schema");
  };
  const text::JsonSchema wide = schema(1000), tight = schema(12);
  const std::string p10 = "{\"s\":\"" + std::string(10, 'a'), p11 = p10 + "b";
  EXPECT_TRUE(text::JsonMatcher(wide.root()).feed(p11));
  EXPECT_EQ(allowed_after(trie, wide, p10), allowed_after(trie, wide, p11));
  const auto t10 = allowed_after(trie, tight, p10), t11 = allowed_after(trie, tight, p11);
  EXPECT_NE(t10, t11);
  const auto longer = tokenizer().encode("aa");  // 2 more characters fit after 10, not after 11
  ASSERT_EQ(longer.size(), 1u);
  EXPECT_TRUE(t10[size_t(longer[0])]);
  EXPECT_FALSE(t11[size_t(longer[0])]);
}

const ojson kTools = ojson::parse(R"([
  {"type":"function","function":{"name":"set_alarm","strict":true,"parameters":{"type":"object",
    "properties":{"hour":{"type":"integer"},"loud":{"type":"boolean"},"days":{"type":"array",
    "items":{"enum":[1,2,3]},"maxItems":3}},"required":["hour"]}}},
  {"type":"function","function":{"name":"stop","strict":true,"parameters":{"type":"object",
    "properties":{}}}}
])");

// Every call of a parsed message is one of kTools with arguments of its schema (checked here by
// hand, not by the grammar).
void expect_valid_calls(const text::ParsedMessage& msg, const std::string& text) {
  for (const auto& c : msg.tool_calls) {
    const ojson a = ojson::parse(c.arguments_json, nullptr, false);
    ASSERT_TRUE(a.is_object()) << text;
    EXPECT_EQ(a, c.arguments) << text;
    if (c.name == "stop") {
      EXPECT_TRUE(a.empty()) << text;
      continue;
    }
    ASSERT_EQ(c.name, "set_alarm") << text;
    ASSERT_TRUE(a.contains("hour") && a["hour"].is_number_integer()) << text;
    for (const auto& [k, v] : a.items()) {
      if (k == "loud") {
        EXPECT_TRUE(v.is_boolean()) << text;
      }
      if (k == "days") {
        ASSERT_TRUE(v.is_array() && v.size() <= 3) << text;
        for (const auto& d : v) EXPECT_TRUE(d == 1 || d == 2 || d == 3) << text;
      }
      EXPECT_TRUE(k == "hour" || k == "loud" || k == "days") << text;
    }
  }
}

TEST(ToolCallConstraint, RandomLogitsGiveCallsOfTheDeclaredTools) {
  const TokenTrie trie(tokenizer());
  const text::ToolGrammar g = text::ToolGrammar::compile(kTools);
  text::ParserOptions po;
  po.tools = kTools;
  po.start = text::GenerationStart::kToolCalls;
  int complete = 0;
  for (unsigned seed = 1; seed <= 6; ++seed) {
    ToolCallConstraint c(trie, tokenizer(),
                         text::ToolCallMatcher(&g, text::CallStart::kInsideBlock), {kEos});
    const Sampled r = sample(trie, c, seed, 200);
    text::ToolCallMatcher m(&g, text::CallStart::kInsideBlock);
    EXPECT_TRUE(m.feed(r.text)) << r.text;  // always a prefix of the grammar
    if (!r.stopped) continue;
    ++complete;
    const text::ParsedMessage msg = text::OutputParser::parse(r.text, po);
    EXPECT_TRUE(msg.problem.empty()) << msg.problem << "\n" << r.text;
    EXPECT_FALSE(msg.tool_calls.empty()) << r.text;
    expect_valid_calls(msg, r.text);
  }
  std::printf("[ info ] %d of 6 random-logit runs completed a calls block within 200 tokens\n",
              complete);
}

TEST(ToolCallConstraint, AFreeStartAllowsAnyTextAndStopsOnlyOutsideTheBlock) {
  const TokenTrie trie(tokenizer());
  const text::ToolGrammar g = text::ToolGrammar::compile(kTools);
  ToolCallConstraint c(trie, tokenizer(), text::ToolCallMatcher(&g, text::CallStart::kFree),
                       {kEos});
  std::vector<float> logits(size_t(trie.vocab_size()), 0.25f);
  c.mask(logits);
  size_t finite = 0;
  for (const float l : logits) finite += std::isfinite(l);
  EXPECT_GT(finite, size_t(trie.vocab_size()) / 2);  // free text: the plain vocabulary
  EXPECT_EQ(logits[size_t(kEos)], 0.25f);            // and the end
  const std::string text = "Sure.\n\n" + std::string(text::kDsmlCallsOpen) + "\n" +
                           std::string(text::kDsmlInvokeOpen) + "stop\">\n\n" +
                           std::string(text::kDsmlInvokeClose) + "\n" +
                           std::string(text::kDsmlCallsClose);
  const auto ids = tokenizer().encode(text);
  for (size_t i = 0; i < ids.size(); ++i) {
    std::fill(logits.begin(), logits.end(), 0.25f);
    c.mask(logits);
    ASSERT_TRUE(std::isfinite(logits[size_t(ids[i])])) << "token " << i << " refused";
    if (!c.complete()) {
      EXPECT_TRUE(std::isinf(logits[size_t(kEos)])) << "end allowed inside the block";
    }
    c.accept(ids[i]);
  }
  ASSERT_TRUE(c.complete());
  std::fill(logits.begin(), logits.end(), 0.25f);
  c.mask(logits);
  finite = 0;
  for (const float l : logits) finite += std::isfinite(l);
  EXPECT_EQ(finite, 1u);  // after the block only the end
}

}  // namespace
}  // namespace cedar::runtime
