// ECMA-262 patterns as byte automata (text/regex_automaton.h): JSON Schema's unanchored search
// semantics, code point classes over UTF-8, the refused constructs, and the bounds.
#include "text/regex_automaton.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cedar::text {
namespace {

ByteDfa compile(const std::vector<std::string>& patterns, size_t max_states = 4096) {
  uint64_t work = 50000000;
  ByteDfa d = ByteDfa::patterns(patterns, max_states, &work);
  const uint64_t all = (uint64_t(1) << patterns.size()) - 1;
  d.finish([all](uint32_t, const ByteDfa::State& s) { return (s.accept & all) == all; });
  return d;
}

bool matches(const std::string& pattern, const std::string& s) {
  const ByteDfa d = compile({pattern});
  const uint32_t at = d.run(s);
  return at != ByteDfa::kDead && d.state(at).final;
}

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += char(cp);
  } else if (cp < 0x800) {
    s += char(0xC0 | cp >> 6);
    s += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += char(0xE0 | cp >> 12);
    s += char(0x80 | (cp >> 6 & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  } else {
    s += char(0xF0 | cp >> 18);
    s += char(0x80 | (cp >> 12 & 0x3F));
    s += char(0x80 | (cp >> 6 & 0x3F));
    s += char(0x80 | (cp & 0x3F));
  }
  return s;
}

TEST(RegexAutomaton, PatternsAreUnanchoredSearchesUnlessAnchored) {
  struct C {
    const char* pattern;
    const char* s;
    bool match;
  };
  for (const C& c : std::vector<C>{
           {"abc", "xxabcxx", true},
           {"abc", "ab", false},
           {"^abc", "abcx", true},
           {"^abc", "xabc", false},
           {"abc$", "xabc", true},
           {"abc$", "abcx", false},
           {"^$", "", true},
           {"^$", "a", false},
           {"", "anything", true},
           {"a|^b", "xb", false},
           {"a|^b", "bx", true},
           {"(^a|b)c", "xac", false},
           {"x*", "", true},
           {"^a*$", "aaa", true},
           {"^a+?$", "", false},
           {"^(ab){2}$", "abab", true},
           {"^(ab){2}$", "ab", false},
           {"^a{2,}$", "aaaa", true},
           {"^a{2,3}$", "aaaa", false},
           {"^a?b$", "b", true},
           {"^(?:x|yz)+$", "xyzx", true},
           {"^(?<n>q)r$", "qr", true},
           {"^.$", "\n", false},
           {"^.$", "\t", true},
           {"^[]$", "", false},
           {"^[^]$", "\n", true},
           {"^[a-c\\d]+$", "b7", true},
           {"^[^a-c]$", "d", true},
           {"^[^a-c]$", "b", false},
           {"^\\w\\W\\s\\S$", "a- x", true},
           {"^\\D$", "5", false},
           {"^\\x41\\u0042\\u{43}\\cA\\0$", "ABC\x01", false},
           {"^[\\b]$", "\b", true},
           {"^a\\.b$", "a.b", true},
           {"^a\\.b$", "axb", false},
           {"^\\/$", "/", true},
           {"^{$", "{", true},
           {"^\\t\\n\\v\\f\\r$", "\t\n\v\f\r", true},
       }) {
    EXPECT_EQ(matches(c.pattern, c.s), c.match) << "/" << c.pattern << "/ on \"" << c.s << "\"";
  }
  EXPECT_TRUE(matches("^\\x41\\u0042\\u{43}\\cA\\0$", std::string("ABC\x01", 4) + '\0'));
}

TEST(RegexAutomaton, CodePointClassesOverUtf8) {
  // every boundary of the UTF-8 lengths, and the surrogate gap
  const ByteDfa d = compile({"^[\\u0080-\\u{10FFFF}]$"});
  for (const uint32_t cp :
       {0x80u, 0x7FFu, 0x800u, 0xD7FFu, 0xE000u, 0xFFFFu, 0x10000u, 0x10FFFFu}) {
    const uint32_t at = d.run(utf8(cp));
    EXPECT_TRUE(at != ByteDfa::kDead && d.state(at).final) << std::hex << cp;
  }
  const uint32_t ascii = d.run("a");
  EXPECT_TRUE(ascii == ByteDfa::kDead || !d.state(ascii).final);
  EXPECT_TRUE(matches("^[α-ω]+$", "λμ"));
  EXPECT_FALSE(matches("^[α-ω]+$", "λA"));
  EXPECT_TRUE(matches("^.$", utf8(0x1F600)));  // one code point, four bytes
  EXPECT_FALSE(matches("^.$", utf8(0x2028)));  // a line terminator
  EXPECT_TRUE(matches("^\\ud83d\\ude00$", utf8(0x1F600)));
  EXPECT_TRUE(matches("^[^a]$", utf8(0x10FFFF)));
  EXPECT_TRUE(matches("^\\s$", utf8(0x3000)));
  EXPECT_TRUE(matches("^é+$", "éé"));
}

TEST(RegexAutomaton, SeveralPatternsRunTogether) {
  uint64_t work = 1000000;
  const ByteDfa d = ByteDfa::patterns({"^a", "b$", "c"}, 4096, &work);
  auto mask = [&](const std::string& s) {
    const uint32_t at = d.run(s);
    return at == ByteDfa::kDead ? 0 : d.state(at).accept;
  };
  EXPECT_EQ(mask("ab"), 3u);
  EXPECT_EQ(mask("xcb"), 6u);
  EXPECT_EQ(mask("acx"), 5u);
  EXPECT_EQ(mask("x"), 0u);
}

TEST(RegexAutomaton, RemainingLengthsAreCodePoints) {
  const ByteDfa d = compile({"^\\d{3}é?$"});
  const auto& start = d.state(d.start());
  EXPECT_EQ(start.min_rem, 3u);
  EXPECT_EQ(start.max_rem, 4u);
  const ByteDfa open = compile({"^a+$"});
  EXPECT_EQ(open.state(open.start()).min_rem, 1u);
  EXPECT_EQ(open.state(open.start()).max_rem, ByteDfa::kInf);
  EXPECT_TRUE(compile({"^a$", "^b$"}).empty());  // both at once: nothing
}

TEST(RegexAutomaton, LiteralTries) {
  ByteDfa t = ByteDfa::literals({"ab", "a", "abc", "b"}, 100);
  t.finish([](uint32_t, const ByteDfa::State& s) { return s.tag != UINT32_MAX; });
  EXPECT_EQ(t.state(t.run("a")).tag, 1u);
  EXPECT_EQ(t.state(t.run("abc")).tag, 2u);
  EXPECT_EQ(t.run("ac"), ByteDfa::kDead);
  EXPECT_EQ(t.state(t.start()).min_rem, 1u);
  EXPECT_EQ(t.state(t.start()).max_rem, 3u);
  EXPECT_THROW(ByteDfa::literals({"abcdef"}, 3), RegexError);
  EXPECT_EQ(regex_quote("a.b*(c)"), "a\\.b\\*\\(c\\)");
  EXPECT_TRUE(matches("^" + regex_quote("1+1=[2]?") + "$", "1+1=[2]?"));
}

TEST(RegexAutomaton, UnsupportedConstructsAndBoundsAreRefused) {
  for (const char* p :
       {"(a)\\1",  "\\k<n>", "a(?=b)", "a(?!b)", "(?<=a)b",     "(?<!a)b", "\\bx", "x\\B", "\\p{L}",
        "\\P{L}",  "(?i)a",  "a**",    "*a",     "a{3,2}",      "(a",      "a)",   "[a",   "[z-a]",
        "[\\d-z]", "\\",     "\\c1",   "\\xZZ",  "\\u{110000}", "a{1001}", "\\01"}) {
    uint64_t work = 1000000;
    EXPECT_THROW(ByteDfa::patterns({p}, 4096, &work), RegexError) << p;
  }
  uint64_t work = 50000000;
  EXPECT_THROW(ByteDfa::patterns({"(a|b)*a(a|b){12}"}, 4096, &work), RegexError);  // 2^13 states
  work = 1000;  // the work budget is shared and bounded
  EXPECT_THROW(ByteDfa::patterns({"^[ax]*x[ax]{6}$"}, 1 << 20, &work), RegexError);
  EXPECT_THROW(ByteDfa::patterns({"(((a{100}){100}){100})"}, 4096, &work), RegexError);
}

}  // namespace
}  // namespace cedar::text
