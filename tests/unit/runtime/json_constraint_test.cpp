// Constrained decoding over the real V4.1 vocabulary: sampling from random logits through the
// mask gives, every time, a valid JSON prefix that the schema still allows, and a stop token
// only after a complete value, which then parses (nlohmann) and validates against the schema
// (checked here independently of the matcher).
#include "runtime/json_constraint.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace cedar::runtime {
namespace {

using text::ojson;

const text::Tokenizer& tokenizer() {
  static const text::Tokenizer t =
      text::Tokenizer::load(std::string(CEDAR_BINARY_DIR) + "/tokenizer/tokenizer.json");
  return t;
}

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

struct Sampled {
  std::string text;
  bool stopped = false;
};

// Greedy over random logits biased towards a few structural tokens, so that runs finish.
Sampled sample(const TokenTrie& trie, const text::SchemaNode* root, unsigned seed, int max_tokens) {
  const int32_t eos = 1;
  JsonConstraint c(trie, tokenizer(), root, {eos});
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd;
  std::vector<float> logits(size_t(trie.vocab_size()));
  Sampled r;
  for (int step = 0; step < max_tokens; ++step) {
    for (auto& l : logits) l = nd(rng);
    c.mask(logits);
    int32_t best = 0;
    for (size_t i = 1; i < logits.size(); ++i)
      if (logits[i] > logits[size_t(best)]) best = int32_t(i);
    EXPECT_TRUE(std::isfinite(logits[size_t(best)])) << "everything masked at step " << step;
    if (best == eos) {
      EXPECT_TRUE(c.complete()) << r.text;
      r.stopped = true;
      break;
    }
    c.accept(best);
    tokenizer().append_token_bytes(best, &r.text);
  }
  return r;
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
      const Sampled r = sample(trie, s->root(), seed, 160);
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
  JsonConstraint c(trie, tokenizer(), any.root(), {1});
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

}  // namespace
}  // namespace cedar::runtime
