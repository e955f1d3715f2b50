// Tool calls under tool_choice "auto" over the real V4.1 vocabulary: with the names-only constraint
// a request with tools gets whenever it offers tools, sampling from random logits pushed towards
// DSML gives free text and calls blocks that name only declared tools and parameters; the DSML
// marker never stands outside a block, and the marker token itself is what the mask offers (the
// model writes tags with it).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "constraint_test_util.h"
#include "runtime/token_constraint.h"
#include "text/output_parser.h"

namespace cedar::runtime {
namespace {

using testing::kEos;
using testing::sample;
using testing::tokenizer;
using text::ojson;

// Tools as agent clients declare them: not strict, so only their names are held.
const ojson kAgentTools = ojson::parse(R"([
  {"type":"function","function":{"name":"Bash","parameters":{"type":"object","properties":{
    "command":{"type":"string"},"timeout":{"type":"number"},"description":{"type":"string"}},
    "required":["command"]}}},
  {"type":"function","function":{"name":"Read","parameters":{"type":"object","properties":{
    "file_path":{"type":"string"},"limit":{"type":"integer"}},"required":["file_path"]}}}
])");

int32_t marker_id() { return *tokenizer().token_to_id(text::kDsmlMarker); }

TEST(ToolCallConstraint, TheMaskOffersTheMarkerTokenOnlyWhereATagMayStand) {
  const TokenTrie trie(tokenizer());
  const text::ToolGrammar g = text::ToolGrammar::compile(kAgentTools, /*forced=*/false);
  ToolCallConstraint c(trie, tokenizer(), text::ToolCallMatcher(&g, text::CallStart::kFree),
                       {kEos});
  std::vector<float> logits(size_t(trie.vocab_size()), 0.0f);
  c.mask(logits);
  EXPECT_TRUE(std::isinf(logits[size_t(marker_id())]));  // not at the start of the answer
  EXPECT_EQ(logits[kEos], 0.0f);                         // which may end
  for (const int32_t id : tokenizer().encode("Let me look.\n\n<")) c.accept(id);
  std::fill(logits.begin(), logits.end(), 0.0f);
  c.mask(logits);
  EXPECT_EQ(logits[size_t(marker_id())], 0.0f);  // after "<" the calls tag may begin
  c.accept(marker_id());
  std::fill(logits.begin(), logits.end(), 0.0f);
  c.mask(logits);
  EXPECT_TRUE(std::isinf(logits[kEos]));  // half a tag may not end the answer
  size_t finite = 0;
  for (const float l : logits) finite += std::isfinite(l);
  EXPECT_LT(finite, 16u);  // only " calls>" may follow, spelled in a few ways
}

TEST(ToolCallConstraint, RandomLogitsWriteOnlyDeclaredToolsAndNoStrayTags) {
  const TokenTrie trie(tokenizer());
  const text::ToolGrammar g = text::ToolGrammar::compile(kAgentTools, /*forced=*/false);
  // push the sampler towards the pieces of DSML so that blocks begin and end
  std::vector<float> push(size_t(trie.vocab_size()), 0.0f);
  push[size_t(marker_id())] += 7.0f;
  for (const char* piece : {"<", "</", ">", "\n", "\">", "\"", " calls", " invoke", " parameter",
                            " name", "=\"", "Bash", "Read", "command", "file_path", "ls"})
    for (const int32_t id : tokenizer().encode(piece)) push[size_t(id)] += 3.5f;
  text::ParserOptions po;
  po.tools = kAgentTools;
  int blocks = 0, calls = 0;
  for (unsigned seed = 1; seed <= 8; ++seed) {
    ToolCallConstraint c(trie, tokenizer(), text::ToolCallMatcher(&g, text::CallStart::kFree),
                         {kEos});
    const auto [text, stopped] = sample(trie, c, seed, 400, push);
    const text::ParsedMessage msg = text::OutputParser::parse(text, po);
    EXPECT_EQ(msg.content.find(text::kDsmlMarker), std::string::npos) << text;
    if (stopped) {
      EXPECT_FALSE(msg.malformed) << msg.problem << "\n" << text;
    }
    blocks += text.find(text::kDsmlCallsClose) != std::string::npos;
    for (const auto& call : msg.tool_calls) {
      ++calls;
      ASSERT_TRUE(call.name == "Bash" || call.name == "Read") << text;
      const ojson a = ojson::parse(call.arguments_json, nullptr, false);
      ASSERT_TRUE(a.is_object()) << text;
      for (const auto& [k, v] : a.items()) {
        if (call.name == "Bash") {
          EXPECT_TRUE(k == "command" || k == "timeout" || k == "description") << text;
        } else {
          EXPECT_TRUE(k == "file_path" || k == "limit") << text;
        }
      }
    }
  }
  std::printf("[ info ] 8 random-logit answers: %d completed calls blocks, %d calls\n", blocks,
              calls);
  EXPECT_GT(calls, 0);  // the bias makes calls: the test saw some
}

// The masks of free text and of raw values are shared by every request of an engine, and a raw
// value's mask does not depend on the tool or its used parameters: the mask one grammar finds in
// the shared cache equals the one computed afresh for it.
TEST(ToolCallConstraint, SharedMasksEqualMasksComputedAfresh) {
  const TokenTrie shared(tokenizer());
  const text::ToolGrammar a = text::ToolGrammar::compile(kAgentTools, /*forced=*/false);
  const text::ToolGrammar b = text::ToolGrammar::compile(ojson::parse(R"([
    {"type":"function","function":{"name":"write","parameters":{"type":"object","properties":{
      "path":{"type":"string"},"text":{"type":"string"}}}}}])"),
                                                         /*forced=*/false);
  const std::string open = "ok\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"";
  const std::string in_a =
      open + "Bash\">\n<｜DSML｜ parameter name=\"command\" string=\"true\">ls";
  const std::string in_b =
      open + "write\">\n<｜DSML｜ parameter name=\"text\" string=\"true\">hi <";
  auto masked = [](const TokenTrie& trie, const text::ToolGrammar& g, const std::string& text) {
    ToolCallConstraint c(trie, tokenizer(), text::ToolCallMatcher(&g, text::CallStart::kFree),
                         {kEos});
    for (const int32_t id : tokenizer().encode(text, /*allow_special=*/true)) c.accept(id);
    std::vector<float> logits(size_t(trie.vocab_size()), 1.0f);
    c.mask(logits);
    return logits;
  };
  using Case = std::pair<const text::ToolGrammar*, std::string>;
  for (const auto& [g, text] :
       {Case{&a, in_a}, Case{&b, in_b}, Case{&a, "Sure."}, Case{&b, "Sure <"}}) {
    const std::vector<float> via_shared = masked(shared, *g, text);
    const std::vector<float> again = masked(shared, *g, text);  // from the shared cache
    const TokenTrie fresh(tokenizer());
    EXPECT_EQ(via_shared, masked(fresh, *g, text)) << text;
    EXPECT_EQ(again, via_shared) << text;
  }
  // the first raw value's mask serves the other grammar's raw value: the same allowed tokens
  const TokenTrie fresh(tokenizer());
  EXPECT_EQ(masked(shared, b, in_b.substr(0, in_b.size() - 1)),
            masked(fresh, b, in_b.substr(0, in_b.size() - 1)));
}

}  // namespace
}  // namespace cedar::runtime
