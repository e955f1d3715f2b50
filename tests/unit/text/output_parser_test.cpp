// OutputParser: §3.12 cases, schema typing, malformed DSML, and the every-split test: many
// generated completions (reasoning, content, parallel calls with nested JSON, unicode, quotes)
// fed split at every byte boundary, byte by byte and in random chunks must give the same final
// message, the same concatenated deltas, and exactly the generator's ground truth.
#include "text/output_parser.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "text/dsml.h"
#include "text/utf8.h"

using cedar::text::GenerationStart;
using cedar::text::ojson;
using cedar::text::OutputParser;
using cedar::text::ParsedMessage;
using cedar::text::ParseEvent;
using cedar::text::ParserOptions;

namespace {

ParserOptions thinking_opts(ojson tools = ojson::array()) {
  ParserOptions o;
  o.start = GenerationStart::kReasoning;
  o.tools = std::move(tools);
  return o;
}

// Everything one parse run produced.
struct ParseRun {
  ParsedMessage msg;
  std::string reasoning, content;  // concatenated deltas
  std::vector<std::string> args;   // concatenated argument deltas per call
  std::vector<std::string> ids, names;
  int ends = 0;
  bool ordered = true;  // begin -> arguments -> end per call, calls in index order
  bool utf8 = true;     // every delta valid UTF-8
};

ParseRun run_chunks(const std::string& text, const std::vector<std::size_t>& cuts,
                    const ParserOptions& o) {
  OutputParser p(o);
  std::vector<ParseEvent> ev;
  std::size_t prev = 0;
  for (std::size_t c : cuts) {
    p.feed(std::string_view(text).substr(prev, c - prev), &ev);
    prev = c;
  }
  p.feed(std::string_view(text).substr(prev), &ev);
  p.finish(&ev);
  ParseRun r;
  r.msg = p.message();
  int open = -1;
  for (const auto& e : ev) {
    if (!e.text.empty() && !cedar::text::utf8_valid(e.text)) r.utf8 = false;
    switch (e.kind) {
      case ParseEvent::Kind::kReasoningDelta:
        r.reasoning += e.text;
        break;
      case ParseEvent::Kind::kContentDelta:
        r.content += e.text;
        break;
      case ParseEvent::Kind::kToolCallBegin:
        if (open != -1 || e.index != static_cast<int>(r.args.size())) r.ordered = false;
        open = e.index;
        r.args.emplace_back();
        r.ids.push_back(e.id);
        r.names.push_back(e.name);
        break;
      case ParseEvent::Kind::kToolCallArguments:
        if (e.index != open)
          r.ordered = false;
        else
          r.args[static_cast<std::size_t>(open)] += e.text;
        break;
      case ParseEvent::Kind::kToolCallEnd:
        if (e.index != open) r.ordered = false;
        open = -1;
        ++r.ends;
        break;
    }
  }
  if (open != -1) r.ordered = false;
  return r;
}

ParseRun run_whole(const std::string& text, const ParserOptions& o) {
  return run_chunks(text, {}, o);
}

// The run's deltas agree with its own final message, and every call's arguments are one JSON
// object.
::testing::AssertionResult consistent(const ParseRun& r) {
  if (!r.utf8) return ::testing::AssertionFailure() << "a delta is not valid UTF-8";
  if (!r.ordered) return ::testing::AssertionFailure() << "tool-call events out of order";
  if (r.reasoning != r.msg.reasoning_content)
    return ::testing::AssertionFailure() << "reasoning deltas";
  if (r.content != r.msg.content) return ::testing::AssertionFailure() << "content deltas";
  if (r.args.size() != r.msg.tool_calls.size() || r.ends != static_cast<int>(r.args.size()))
    return ::testing::AssertionFailure() << "call count";
  for (std::size_t i = 0; i < r.args.size(); ++i) {
    const auto& c = r.msg.tool_calls[i];
    if (r.args[i] != c.arguments_json || r.ids[i] != c.id || r.names[i] != c.name)
      return ::testing::AssertionFailure() << "call " << i << " deltas";
    const ojson a = ojson::parse(c.arguments_json, nullptr, false);
    if (a.is_discarded() || !a.is_object())
      return ::testing::AssertionFailure() << "arguments not a JSON object: " << c.arguments_json;
  }
  return ::testing::AssertionSuccess();
}

bool same(const ParseRun& a, const ParseRun& b) {
  if (a.msg.content != b.msg.content || a.msg.reasoning_content != b.msg.reasoning_content ||
      a.msg.malformed != b.msg.malformed || a.msg.saw_eos != b.msg.saw_eos ||
      a.msg.tool_calls.size() != b.msg.tool_calls.size())
    return false;
  for (std::size_t i = 0; i < a.msg.tool_calls.size(); ++i) {
    const auto& x = a.msg.tool_calls[i];
    const auto& y = b.msg.tool_calls[i];
    if (x.id != y.id || x.name != y.name || x.arguments_json != y.arguments_json) return false;
  }
  return a.reasoning == b.reasoning && a.content == b.content && a.args == b.args;
}

// ---- generator of completions with known ground truth ------------------------------------------

// Text holding one of these is not plain text to the parser (the DSML marker alone is a stray
// tag, dropped: OutputParser.MalformedDsmlIsDropped).
const std::vector<std::string_view> kTags = {"</think>",
                                             "<｜end▁of▁sentence｜>",
                                             "<｜DSML｜ calls>",
                                             "<｜DSML｜tool_calls>",
                                             "</｜DSML｜ parameter>",
                                             "</｜DSML｜parameter>",
                                             "｜DSML｜"};

bool has_tag(const std::string& s) {
  for (auto t : kTags)
    if (s.find(t) != std::string::npos) return true;
  return false;
}

struct Gen {
  std::mt19937 rng;
  explicit Gen(uint32_t seed) : rng(seed) {}
  int uni(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
  bool coin(double p = 0.5) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; }

  std::string text(int max_frags) {
    static const std::vector<std::string> pool = {"Hello",      " world",
                                                  "你好",       "，世界",
                                                  "😀",          "👩‍👩‍👧",
                                                  "é",          "e\u0301",
                                                  "\n",         "\n\n",
                                                  " ",          "\t",
                                                  "\"",         "\\",
                                                  "'",          "<",
                                                  ">",          "</",
                                                  "</thin",     "<think",
                                                  "<｜",        "｜DSML",
                                                  "<｜DS",      "｜",
                                                  "▁",          "<｜end▁of",
                                                  "</｜DSML",   "<｜DSML｜ call",
                                                  "{\"a\": 1}", "[1, 2]",
                                                  "&amp;",      "a<b & c",
                                                  "𝔘𝔫𝔦",        "\r\n",
                                                  "null",       "true",
                                                  "  ",         "\u2028",
                                                  "\x01",       "x"};
    for (;;) {
      std::string s;
      const int n = uni(0, max_frags);
      for (int i = 0; i < n; ++i)
        s += pool[static_cast<std::size_t>(uni(0, static_cast<int>(pool.size()) - 1))];
      if (!has_tag(s)) return s;
    }
  }

  ojson value(int depth) {
    switch (uni(0, depth > 2 ? 4 : 6)) {
      case 0:
        return ojson(text(4));
      case 1: {
        static const int64_t ints[] = {0, 1, -1, 42, -987654321, 9007199254740993LL};
        return ojson(ints[uni(0, 5)]);
      }
      case 2: {
        static const double fl[] = {0.5, -2.25, 1e-07, 3.14159, 1e+20, 123456.789, -0.0};
        return ojson(fl[uni(0, 6)]);
      }
      case 3:
        return coin() ? ojson(true) : ojson(false);
      case 4:
        return ojson();
      case 5: {
        ojson a = ojson::array();
        for (int i = uni(0, 3); i > 0; --i) a.push_back(value(depth + 1));
        return a;
      }
      default: {
        static const char* keys[] = {"a", "key with space", "ключ", "q\"uote", "<k>", "n"};
        ojson o = ojson::object();
        for (int i = uni(0, 3); i > 0; --i) o[keys[uni(0, 5)]] = value(depth + 1);
        return o;
      }
    }
  }
};

struct Truth {
  std::string text;
  bool thinking = false;
  std::string reasoning, content;
  std::vector<cedar::text::ToolCall> calls;
  bool eos = false;
  ojson tools = ojson::array();
};

const char* json_type(const ojson& v) {
  if (v.is_string()) return "string";
  if (v.is_boolean()) return "boolean";
  if (v.is_null()) return "null";
  if (v.is_number_integer()) return "integer";
  if (v.is_number()) return "number";
  if (v.is_array()) return "array";
  return "object";
}

Truth generate(Gen& g) {
  Truth t;
  t.thinking = g.coin(0.7);
  cedar::text::PromptBuilder b;
  const bool unfinished_reasoning = t.thinking && g.coin(0.08);
  if (t.thinking) {
    t.reasoning = g.text(12);
    b.content(t.reasoning);
    if (unfinished_reasoning) {
      t.text = b.text();
      return t;
    }
    b.tmpl("</think>");
  }
  t.content = g.text(10);
  b.content(t.content);
  const int ncalls = g.coin(0.75) ? g.uni(1, 3) : 0;
  std::vector<std::string> names = {"get_weather", "search", "run_code", "now", "f-1"};
  std::shuffle(names.begin(), names.end(), g.rng);
  const bool with_schema = g.coin();
  for (int i = 0; i < ncalls; ++i) {
    cedar::text::ToolCall c;
    c.id = "call_" + std::to_string(i);
    c.name = names[static_cast<std::size_t>(i)];
    static const char* params[] = {"location", "q", "días", "ключ", "a_b-c", "x1", "path"};
    ojson props = ojson::object();
    for (int k = g.uni(0, 4); k > 0; --k) {
      const std::string key = params[g.uni(0, 6)];
      if (c.arguments.contains(key)) continue;
      ojson v = g.coin(0.45) ? ojson(g.text(8)) : g.value(0);
      if (v.is_string() && has_tag(v.get<std::string>())) continue;
      c.arguments[key] = v;
      props[key] = ojson{{"type", json_type(v)}};
    }
    if (with_schema)
      t.tools.push_back(
          ojson{{"type", "function"},
                {"function",
                 {{"name", c.name}, {"parameters", {{"type", "object"}, {"properties", props}}}}}});
    t.calls.push_back(std::move(c));
  }
  if (!t.calls.empty()) {
    b.tmpl("\n\n");
    cedar::text::render_tool_calls(t.calls, &b);
  }
  t.eos = g.coin(0.85);
  if (t.eos) b.tmpl("<｜end▁of▁sentence｜>");
  t.text = b.text();
  return t;
}

ParserOptions opts_for(const Truth& t) {
  ParserOptions o;
  o.start = t.thinking ? GenerationStart::kReasoning : GenerationStart::kContent;
  o.tools = t.tools;
  return o;
}

}  // namespace

TEST(OutputParser, SpecExampleE13) {
  const ParsedMessage m = OutputParser::parse(
      "Simple arithmetic.</think>2 + 2 = 4.<｜end▁of▁sentence｜>", thinking_opts());
  EXPECT_EQ(m.reasoning_content, "Simple arithmetic.");
  EXPECT_EQ(m.content, "2 + 2 = 4.");
  EXPECT_TRUE(m.tool_calls.empty());
  EXPECT_TRUE(m.saw_eos);
  EXPECT_FALSE(m.malformed);
  EXPECT_EQ(
      m.to_openai().dump(),
      R"({"role":"assistant","content":"2 + 2 = 4.","reasoning_content":"Simple arithmetic.","tool_calls":[]})");
}

TEST(OutputParser, TextRules) {
  // Chat mode: everything is content; a stray </think> is dropped; text after EOS is ignored.
  ParsedMessage m =
      OutputParser::parse("</think>Hi <b>there</b></think>!<｜end▁of▁sentence｜>junk");
  EXPECT_EQ(m.content, "Hi <b>there</b>!");
  EXPECT_EQ(m.to_openai()["reasoning_content"], ojson());
  // Reasoning and content keep their whitespace verbatim (the prompt re-renders them verbatim).
  m = OutputParser::parse("\n  r  \n</think>\n\nanswer\n", thinking_opts());
  EXPECT_EQ(m.reasoning_content, "\n  r  \n");
  EXPECT_EQ(m.content, "\n\nanswer\n");
  EXPECT_FALSE(m.saw_eos);
  // No </think>: all reasoning.
  m = OutputParser::parse("still thinking <｜end▁of▁sentence｜>", thinking_opts());
  EXPECT_EQ(m.reasoning_content, "still thinking ");
  EXPECT_EQ(m.content, "");
  // A held tag prefix that never completes is text after all.
  m = OutputParser::parse("a </thi", thinking_opts());
  EXPECT_EQ(m.reasoning_content, "a </thi");
  m = OutputParser::parse("x<｜DSML｜ call");  // the start of a DSML tag, which is not shown
  EXPECT_EQ(m.content, "x");
  EXPECT_TRUE(m.malformed);
}

TEST(OutputParser, CallsAndTyping) {
  const ojson tools = ojson::parse(
      R"([{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{
      "s":{"type":"string"},"i":{"type":"integer"},"n":{"type":"number"},"b":{"type":"boolean"},
      "a":{"type":"array"},"o":{"type":"object"},"e":{"enum":["x","y"]},"u":{"type":["integer","null"]},
      "any":{}}}}}])");
  const std::string text =
      "ok</think>Calling.\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"f\">\n"
      "<｜DSML｜ parameter name=\"s\" string=\"false\">123</｜DSML｜ parameter>\n"  // string stays
                                                                                    // string
      "<｜DSML｜ parameter name=\"i\" string=\"true\">42</｜DSML｜ parameter>\n"    // integer from
                                                                                    // "true"
      "<｜DSML｜ parameter name=\"n\" string=\"false\"> 2.5 </｜DSML｜ parameter>\n"
      "<｜DSML｜ parameter name=\"b\" string=\"true\">true</｜DSML｜ parameter>\n"
      "<｜DSML｜ parameter name=\"a\" string=\"false\">[1, {\"k\": \"v\"}]</｜DSML｜ parameter>\n"
      "<｜DSML｜ parameter name=\"o\" string=\"false\">{\"x\": {\"y\": [null]}}</｜DSML｜ "
      "parameter>\n"
      "<｜DSML｜ parameter name=\"e\" string=\"true\">y</｜DSML｜ parameter>\n"
      "<｜DSML｜ parameter name=\"u\" string=\"false\">null</｜DSML｜ parameter>\n"
      "<｜DSML｜ parameter name=\"any\" string=\"false\">not json</｜DSML｜ parameter>\n"
      "</｜DSML｜ invoke>\n</｜DSML｜ calls><｜end▁of▁sentence｜>";
  const ParsedMessage m = OutputParser::parse(text, thinking_opts(tools));
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_FALSE(m.malformed);
  EXPECT_EQ(m.content, "Calling.");
  EXPECT_EQ(
      m.tool_calls[0].arguments_json,
      R"({"s": "123", "i": 42, "n": 2.5, "b": true, "a": [1, {"k": "v"}], "o": {"x": {"y": [null]}}, "e": "y", "u": null, "any": "not json"})");
  // Same text without a schema: string="true" is a string, string="false" is JSON.
  const ParsedMessage u = OutputParser::parse(text, thinking_opts());
  EXPECT_EQ(u.tool_calls[0].arguments["s"], 123);
  EXPECT_EQ(u.tool_calls[0].arguments["i"], "42");
  EXPECT_EQ(u.tool_calls[0].arguments["any"], "not json");
  // A string schema unwraps a JSON string literal written with string="false".
  const ParsedMessage q = OutputParser::parse(
      "<｜DSML｜ calls><｜DSML｜ invoke name=\"f\"><｜DSML｜ parameter name=\"s\" "
      "string=\"false\">\"a\\nb\"</｜DSML｜ parameter></｜DSML｜ invoke></｜DSML｜ calls>",
      ParserOptions{GenerationStart::kContent, true, tools, "id-"});
  EXPECT_EQ(q.tool_calls[0].arguments_json, R"({"s": "a\nb"})");
  EXPECT_EQ(q.tool_calls[0].id, "id-0");
  EXPECT_FALSE(q.malformed);
  // Whole numbers beyond int64 (once undefined behaviour, found by fuzz.dsml) are integers;
  // a fraction or an infinity is not, and (written with string="true") stays a string.
  const auto int_arg = [&](const std::string& value) {
    return OutputParser::parse(
               "<｜DSML｜ calls><｜DSML｜ invoke name=\"f\"><｜DSML｜ parameter "
               "name=\"i\" string=\"true\">" +
                   value + "</｜DSML｜ parameter></｜DSML｜ invoke></｜DSML｜ calls>",
               ParserOptions{GenerationStart::kContent, true, tools, "id-"})
        .tool_calls.at(0)
        .arguments["i"];
  };
  EXPECT_TRUE(int_arg(std::string(54, '5')).is_number());
  EXPECT_TRUE(int_arg("2.0").is_number());
  EXPECT_TRUE(int_arg("2.5").is_string());
  EXPECT_TRUE(int_arg("1e400").is_string());
}

TEST(OutputParser, ToolCallsVariants) {
  // V4 spellings, parallel calls, zero-argument call, missing string attribute, calls written
  // inside the reasoning, a forced block (prompt ended with "<｜DSML｜ calls>\n").
  ParsedMessage m = OutputParser::parse(
      "<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"a\">\n<｜DSML｜parameter name=\"x\" "
      "string=\"true\">1</｜DSML｜parameter>\n</｜DSML｜invoke>\n"
      "<｜DSML｜ invoke name=\"now\">\n\n</｜DSML｜ invoke>\n</｜DSML｜tool_calls>");
  ASSERT_EQ(m.tool_calls.size(), 2u);
  EXPECT_EQ(m.tool_calls[0].arguments_json, R"({"x": "1"})");
  EXPECT_EQ(m.tool_calls[1].arguments_json, "{}");
  EXPECT_EQ(m.tool_calls[1].id, "call_1");
  EXPECT_FALSE(m.malformed);
  EXPECT_EQ(m.to_openai()["content"], ojson());

  m = OutputParser::parse(
      "<｜DSML｜ invoke name=\"a\"><｜DSML｜ parameter name=\"v\">[1]</｜DSML｜ "
      "parameter></｜DSML｜ invoke></｜DSML｜ calls>",
      ParserOptions{GenerationStart::kToolCalls, true, ojson::array(), "call_"});
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].arguments_json, R"({"v": [1]})");

  m = OutputParser::parse(
      "think\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"a\">\n</｜DSML｜ invoke>\n</｜DSML｜ "
      "calls>\n</think>\n<｜end▁of▁sentence｜>",
      thinking_opts());
  EXPECT_EQ(m.reasoning_content, "think");
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_FALSE(m.malformed);

  // No tools offered: a calls block is dropped, not parsed and not shown.
  ParserOptions off;
  off.parse_tool_calls = false;
  m = OutputParser::parse(
      "x\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"f\">\n\n</｜DSML｜ invoke>\n</｜DSML｜ "
      "calls>",
      off);
  EXPECT_EQ(m.content, "x");
  EXPECT_TRUE(m.tool_calls.empty());
  EXPECT_TRUE(m.malformed);
}

TEST(OutputParser, MalformedDsmlIsDropped) {
  struct Case {
    const char* text;
    const char* content;  // expected content
    std::size_t calls;
  };
  const Case cases[] = {
      // a broken block: dropped to its end, the calls before the break kept
      {"a\n\n<｜DSML｜ calls>\nnot a tag</｜DSML｜ calls>", "a", 0},
      {"<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"f\">\n<｜DSML｜ parameter name=\"k\" "
       "string=\"maybe\">v</｜DSML｜ parameter>",
       "", 1},
      {"<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"f\">\n<｜DSML｜ parameter name=\"k\" "
       "string=\"true\">a</｜DSML｜ parameter>\n"
       "<｜DSML｜ parameter name=\"k\" string=\"true\">b</｜DSML｜ parameter>\n</｜DSML｜ "
       "invoke>\n</｜DSML｜ calls>after",
       "after", 1},
      {"<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"f\">\n<｜DSML｜ parameter name=\"k\" "
       "string=\"true\">trunc",
       "", 1},
      {"<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"f\">\n<｜DSML｜ parameter name=\"k\" "
       "string=\"false\">{\"a\": [1<｜end▁of▁sentence｜>",
       "", 1},
      {"<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"f\">\n<｜DSML｜ param", "", 1},
      {"<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"f\n\">", "", 0},
      {"<｜DSML｜ calls>\n</｜DSML｜ calls>\n\ntrailing words", "trailing words", 0},
      {"<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"f\"><｜end▁of▁sentence｜>", "", 1},
      // stray tags outside a block: dropped up to the block's end or a new block
      {"Sure. <｜DSML｜ invoke name=\"f\">\n</｜DSML｜ invoke>\n</｜DSML｜ calls> done",
       "Sure.  done", 0},
      {"x</｜DSML｜ parameter> y\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"f\">\n\n</｜DSML｜ "
       "invoke>\n</｜DSML｜ calls>",
       "x", 1},
      {"｜DSML｜ string=\"false\">junk<｜end▁of▁sentence｜>", "", 0},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.text);
    const ParseRun whole = run_whole(c.text, ParserOptions{});
    EXPECT_TRUE(whole.msg.malformed);
    EXPECT_FALSE(whole.msg.problem.empty());
    EXPECT_EQ(whole.msg.content, c.content);
    EXPECT_EQ(whole.msg.tool_calls.size(), c.calls);
    EXPECT_TRUE(consistent(whole));
    // Split anywhere: same result.
    const std::string t = c.text;
    for (std::size_t k = 0; k <= t.size(); ++k) {
      const ParseRun r = run_chunks(t, {k}, ParserOptions{});
      ASSERT_TRUE(same(r, whole)) << "split at " << k << ": [" << r.msg.content << "] vs ["
                                  << whole.msg.content << "]";
    }
  }
  // A truncated string parameter still yields valid JSON with what was received.
  const ParsedMessage m = OutputParser::parse(cases[3].text);
  // In the reasoning a stray tag is dropped up to the reasoning's end; the answer is shown.
  const ParsedMessage r =
      OutputParser::parse("think <｜DSML｜ parameter> x</think>answer", thinking_opts());
  EXPECT_EQ(r.reasoning_content, "think ");
  EXPECT_EQ(r.content, "answer");
  EXPECT_EQ(m.tool_calls[0].arguments_json, R"({"k": "trunc"})");
}

TEST(OutputParser, EverySplitOfGeneratedCompletions) {
  Gen g(20260917);
  const int kOutputs = 300;
  long long splits = 0, chunkings = 0, bytes = 0, diffs = 0, truth_diffs = 0, calls = 0;
  for (int n = 0; n < kOutputs; ++n) {
    const Truth t = generate(g);
    const ParserOptions o = opts_for(t);
    bytes += static_cast<long long>(t.text.size());
    calls += static_cast<long long>(t.calls.size());
    const ParseRun whole = run_whole(t.text, o);
    ASSERT_TRUE(consistent(whole)) << t.text;
    // Ground truth.
    bool ok = whole.msg.reasoning_content == t.reasoning && whole.msg.content == t.content &&
              !whole.msg.malformed && whole.msg.saw_eos == t.eos &&
              whole.msg.tool_calls.size() == t.calls.size();
    for (std::size_t i = 0; ok && i < t.calls.size(); ++i) {
      const auto& c = whole.msg.tool_calls[i];
      ok = c.id == t.calls[i].id && c.name == t.calls[i].name &&
           ojson::parse(c.arguments_json) == t.calls[i].arguments;
    }
    if (!ok) {
      ++truth_diffs;
      ADD_FAILURE() << "ground truth differs for\n"
                    << t.text << "\n"
                    << whole.msg.to_openai().dump(1);
    }
    // Every two-chunk split.
    for (std::size_t k = 0; k <= t.text.size(); ++k, ++splits) {
      const ParseRun r = run_chunks(t.text, {k}, o);
      if (!same(r, whole) || !consistent(r)) {
        if (diffs++ < 3) ADD_FAILURE() << "split at " << k << " of\n" << t.text;
      }
    }
    // Byte by byte, and a few random chunkings.
    std::vector<std::size_t> all;
    for (std::size_t k = 1; k < t.text.size(); ++k) all.push_back(k);
    std::vector<std::vector<std::size_t>> cutsets = {all};
    for (int c = 0; c < 4; ++c) {
      std::vector<std::size_t> cuts;
      for (std::size_t k = 1; k < t.text.size(); ++k)
        if (g.coin(0.1)) cuts.push_back(k);
      cutsets.push_back(cuts);
    }
    for (const auto& cuts : cutsets) {
      ++chunkings;
      const ParseRun r = run_chunks(t.text, cuts, o);
      if (!same(r, whole) || !consistent(r)) {
        if (diffs++ < 3) ADD_FAILURE() << "chunking differs for\n" << t.text;
      }
    }
  }
  std::printf(
      "[ every-split ] %d completions, %lld bytes, %lld tool calls: %lld two-chunk splits + "
      "%lld byte-wise/random chunkings, %lld differences, %lld ground-truth differences\n",
      kOutputs, bytes, calls, splits, chunkings, diffs, truth_diffs);
  EXPECT_EQ(diffs, 0);
  EXPECT_EQ(truth_diffs, 0);
}

TEST(OutputParser, TruncatedAndCorruptedCompletionsNeverBreak) {
  // Every prefix of generated completions (a generation cut anywhere), and completions with
  // garbage spliced in: no exception, valid JSON arguments, split-invariant.
  Gen g(7);
  long long runs = 0, malformed = 0;
  for (int n = 0; n < 40; ++n) {
    Truth t = generate(g);
    const ParserOptions o = opts_for(t);
    for (std::size_t cut = 0; cut <= t.text.size(); ++cut) {
      const std::string prefix = t.text.substr(0, cut);
      const ParseRun whole = run_whole(prefix, o);
      ASSERT_TRUE(consistent(whole)) << prefix;
      std::vector<std::size_t> bytewise;
      for (std::size_t k = 1; k < prefix.size(); ++k) bytewise.push_back(k);
      ASSERT_TRUE(same(run_chunks(prefix, bytewise, o), whole)) << prefix;
      ++runs;
      malformed += whole.msg.malformed;
    }
    static const char* garbage[] = {"<",
                                    "\"",
                                    ">",
                                    "<｜DSML｜ calls>",
                                    "</｜DSML｜ invoke>",
                                    "zz",
                                    "<｜DSML｜ parameter name=\"",
                                    "\n",
                                    "<｜end▁of▁sentence｜>"};
    for (int k = 0; k < 30; ++k) {
      std::string s = t.text;
      s.insert(static_cast<std::size_t>(g.uni(0, static_cast<int>(s.size()))),
               garbage[g.uni(0, 8)]);
      const ParseRun whole = run_whole(s, o);
      ASSERT_TRUE(consistent(whole)) << s;
      for (std::size_t c = 0; c <= s.size(); c += 7)
        ASSERT_TRUE(same(run_chunks(s, {c}, o), whole)) << s;
      ++runs;
      malformed += whole.msg.malformed;
    }
  }
  std::printf(
      "[ robustness ] %lld truncated/corrupted completions parsed, %lld flagged malformed\n", runs,
      malformed);
}
