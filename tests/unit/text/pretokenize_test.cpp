#include "text/pretokenize.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "text_test_util.h"

namespace cedar::text {
namespace {

using Pieces = std::vector<std::string>;

// The pre-tokenizer node of the real V4.1 tokenizer.json.
const PreTokenizer& v41_pre() {
  static const PreTokenizer pre = [] {
    const auto j = nlohmann::json::parse(testing::read_file(testing::tokenizer_json_path()));
    return PreTokenizer::from_json(j.at("pre_tokenizer"));
  }();
  return pre;
}

Pieces split(std::string_view text) {
  std::vector<std::string_view> v;
  v41_pre().split(text, &v);
  std::string joined;
  for (auto p : v) joined += p;
  EXPECT_EQ(joined, text) << "pieces must cover the text exactly";
  return Pieces(v.begin(), v.end());
}

TEST(PreTokenizer, V41FileHasThreeSplitsAndByteLevel) { EXPECT_EQ(v41_pre().num_steps(), 3u); }

TEST(PreTokenizer, WordsSpacesAndPunctuation) {
  EXPECT_EQ(split("Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split("don't stop!"), (Pieces{"don", "'t", " stop", "!"}));
  EXPECT_EQ(split("a.b,c"), (Pieces{"a", ".b", ",c"}));  // [punct][A-Za-z]+ alternative
  EXPECT_EQ(split("x  y"), (Pieces{"x", " ", " y"}));    // \s+(?!\S) leaves one space to y
  EXPECT_EQ(split("end   "), (Pieces{"end", "   "}));    // lookahead sees the end of text
  EXPECT_EQ(split("a\r\n\r\nb"), (Pieces{"a", "\r\n\r\n", "b"}));
  EXPECT_EQ(split("x ?!\n\ny"), (Pieces{"x", " ?!\n\n", "y"}));
}

TEST(PreTokenizer, DigitsComeInGroupsOfThree) {
  EXPECT_EQ(split("1234567"), (Pieces{"123", "456", "7"}));
  EXPECT_EQ(split("x12"), (Pieces{"x", "12"}));
  EXPECT_EQ(split("٣٤٥٦"), (Pieces{"٣٤٥", "٦"}));  // any \p{N}, counted in characters
}

TEST(PreTokenizer, CjkAndKanaRunsAreIsolatedFirst) {
  EXPECT_EQ(split("你好world"), (Pieces{"你好", "world"}));
  EXPECT_EQ(split("カタカナとひらがな"), (Pieces{"カタカナとひらがな"}));
  // U+9FA6.. is outside [一-龥]: it is handled by the word pattern instead.
  EXPECT_EQ(split(" \u9FA6x"), (Pieces{" \u9FA6x"}));
}

TEST(PreTokenizer, LookaheadStopsAtPieceEdges) {
  // "  " before a CJK run: the CJK split cuts first, so the spaces are a piece of their own and
  // \s+(?!\S) sees end-of-piece, not the CJK character.
  EXPECT_EQ(split("a  中"), (Pieces{"a", "  ", "中"}));
}

TEST(PreTokenizer, WhiteSpaceIsOnigurumasSet) {
  // U+0085 (NEL) is \s for Oniguruma (Hugging Face tokenizers): " \u0085" is one whitespace run.
  EXPECT_EQ(split("a \u0085 b"), (Pieces{"a", " \u0085", " b"}));
  // U+FEFF is not \s for Oniguruma (ECMAScript says it is): the spaces do not swallow it.
  EXPECT_EQ(split("d  \uFEFF"), (Pieces{"d", " ", " ", "\uFEFF"}));
}

TEST(PreTokenizer, OnigToPcre2Translation) {
  EXPECT_EQ(onig_to_pcre2("a+"), "a+");
  const std::string s = onig_to_pcre2("\\s+(?!\\S)");
  EXPECT_NE(s.find("\\x{85}"), std::string::npos);
  EXPECT_EQ(s.find("\\s"), std::string::npos);
  EXPECT_EQ(onig_to_pcre2("[^\\s]"), onig_to_pcre2("[^\\s]"));
  EXPECT_EQ(onig_to_pcre2("[]a]"), "[]a]");
  EXPECT_THROW(onig_to_pcre2("\\w+"), std::runtime_error);
  EXPECT_THROW(onig_to_pcre2("[\\S]"), std::runtime_error);
  EXPECT_THROW(onig_to_pcre2("[a[b]]"), std::runtime_error);
  EXPECT_THROW(onig_to_pcre2("[ab"), std::runtime_error);
}

TEST(PreTokenizer, RejectsWhatItDoesNotImplement) {
  auto bad = [](const char* js) {
    try {
      PreTokenizer::from_json(nlohmann::json::parse(js));
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(bad(R"({"type":"Whitespace"})").find("unsupported type 'Whitespace'"),
            std::string::npos);
  EXPECT_NE(bad(R"({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"a"},
                  "behavior":"Removed","invert":false},{"type":"ByteLevel","add_prefix_space":false,
                  "use_regex":false}]})")
                .find("Isolated"),
            std::string::npos);
  EXPECT_NE(bad(R"({"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"(a"},
                  "behavior":"Isolated","invert":false},{"type":"ByteLevel",
                  "add_prefix_space":false,"use_regex":false}]})")
                .find("does not compile"),
            std::string::npos);
  EXPECT_NE(bad(R"({"type":"ByteLevel","add_prefix_space":true,"use_regex":false})")
                .find("add_prefix_space"),
            std::string::npos);
  EXPECT_NE(bad(R"({"type":"Sequence","pretokenizers":[]})").find("lacks ByteLevel"),
            std::string::npos);
}

TEST(PreTokenizer, LongRunsDoNotExhaustTheRegexStack) {
  for (const std::string unit : {"a", " ", "\n", "中", "!", "\u0301"}) {
    std::string text;
    for (int i = 0; i < 300000; ++i) text += unit;
    std::vector<std::string_view> v;
    v41_pre().split(text, &v);
    std::size_t total = 0;
    for (auto p : v) total += p.size();
    EXPECT_EQ(total, text.size()) << unit;
  }
}

}  // namespace
}  // namespace cedar::text
