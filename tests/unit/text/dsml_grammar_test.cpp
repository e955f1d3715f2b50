// The strict tool-call grammar: the canonical DSML block of the request's tools is accepted byte
// by byte (and parses back to the same calls); wrong names, parameters, types and spellings are
// refused at the first byte that cannot continue.
#include "text/dsml_grammar.h"

#include <gtest/gtest.h>

#include "text/output_parser.h"

namespace cedar::text {
namespace {

const ojson kTools = ojson::parse(R"([
  {"type":"function","function":{"name":"get_weather","strict":true,"parameters":{
    "type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"},
    "units":{"type":"string","enum":["c","f"]},"detail":{"type":"object","properties":{
      "hourly":{"type":"boolean"}},"required":["hourly"]}},"required":["city","days"]}}},
  {"type":"function","function":{"name":"get","parameters":{"type":"object","properties":{}}}}
])");

std::string param(const std::string& name, bool raw, const std::string& value) {
  return std::string(kDsmlParamOpen) + name +
         (raw ? "\" string=\"true\">" : "\" string=\"false\">") + value +
         std::string(kDsmlParamClose);
}
std::string invoke(const std::string& name, const std::vector<std::string>& params) {
  std::string s = std::string(kDsmlInvokeOpen) + name + "\">\n";
  for (size_t i = 0; i < params.size(); ++i) s += (i ? "\n" : "") + params[i];
  return s + "\n" + std::string(kDsmlInvokeClose);
}
std::string block(const std::vector<std::string>& invokes) {
  std::string s = std::string(kDsmlCallsOpen) + "\n";
  for (size_t i = 0; i < invokes.size(); ++i) s += (i ? "\n" : "") + invokes[i];
  return s + "\n" + std::string(kDsmlCallsClose);
}

// How many bytes of `text` the matcher takes (text.size(): all of it).
size_t accepted(const ToolGrammar& g, const std::string& text, CallStart start = CallStart::kBlock,
                bool* done = nullptr) {
  ToolCallMatcher m(&g, start);
  size_t n = 0;
  while (n < text.size() && m.feed(uint8_t(text[n]))) ++n;
  if (done) *done = m.done();
  return n;
}

TEST(ToolGrammar, AcceptsTheCanonicalBlockAndItParsesBack) {
  const ToolGrammar g = ToolGrammar::compile(kTools);
  const std::string text = block(
      {invoke("get_weather", {param("city", true, "Paris <centre>"), param("days", false, "3"),
                              param("detail", false, "{\"hourly\":true}")}),
       invoke("get", {})});
  bool done = false;
  EXPECT_EQ(accepted(g, text, CallStart::kBlock, &done), text.size());
  EXPECT_TRUE(done);
  ParserOptions o;
  o.tools = kTools;
  const ParsedMessage msg = OutputParser::parse(text, o);
  ASSERT_EQ(msg.tool_calls.size(), 2u) << msg.problem;
  EXPECT_EQ(msg.tool_calls[0].name, "get_weather");
  EXPECT_EQ(msg.tool_calls[0].arguments["city"], "Paris <centre>");
  EXPECT_EQ(msg.tool_calls[0].arguments["days"], 3);
  EXPECT_EQ(msg.tool_calls[1].name, "get");
}

TEST(ToolGrammar, RefusesAtTheFirstByteThatCannotContinue) {
  const ToolGrammar g = ToolGrammar::compile(kTools);
  const std::string head = std::string(kDsmlCallsOpen) + "\n" + std::string(kDsmlInvokeOpen);
  // an undeclared tool: refused at the byte after the longest declared prefix ("get")
  EXPECT_EQ(accepted(g, head + "get_time\">\n"), head.size() + 4);
  // an undeclared parameter
  const std::string in = head + "get_weather\">\n" + std::string(kDsmlParamOpen);
  EXPECT_EQ(accepted(g, in + "town\""), in.size());
  // a string parameter written as JSON, an integer written raw or as a float
  EXPECT_EQ(accepted(g, in + "city\" string=\"false\">"), in.size() + 14);
  EXPECT_EQ(accepted(g, in + "days\" string=\"true\">"), in.size() + 14);
  const std::string days = in + "days\" string=\"false\">";
  EXPECT_EQ(accepted(g, days + "3.5"), days.size() + 1);
  // a parameter twice
  const std::string city = param("city", true, "x");
  const std::string twice = in.substr(0, in.size() - kDsmlParamOpen.size()) + city + "\n" +
                            std::string(kDsmlParamOpen) + "city";
  EXPECT_LT(accepted(g, twice), twice.size());
  // the invoke closed before its required parameters ("days" missing)
  const std::string early = in.substr(0, in.size() - kDsmlParamOpen.size()) + city + "\n</";
  EXPECT_EQ(accepted(g, early), early.size() - 1);
  // the V4 spelling, and anything after the block
  EXPECT_EQ(accepted(g, std::string(kDsmlV4CallsOpen)), 11u);  // "<｜DSML｜" in common
  const std::string whole = block({invoke("get", {})});
  EXPECT_EQ(accepted(g, whole + "x"), whole.size());
}

TEST(ToolGrammar, AFreeStartAllowsTextThenConstrainsTheBlock) {
  const ToolGrammar g = ToolGrammar::compile(kTools);
  bool done = false;
  EXPECT_EQ(accepted(g, "Plain answer, no tool < here.", CallStart::kFree, &done), 29u);
  EXPECT_TRUE(done);
  const std::string text = "Let me check.\n\n" + block({invoke("get", {})});
  EXPECT_EQ(accepted(g, text, CallStart::kFree, &done), text.size());
  EXPECT_TRUE(done);
  const std::string bad =
      "ok " + std::string(kDsmlCallsOpen) + "\n" + std::string(kDsmlInvokeOpen) + "nope";
  EXPECT_LT(accepted(g, bad, CallStart::kFree, &done), bad.size());
  ToolCallMatcher m(&g, CallStart::kFree);
  ASSERT_TRUE(m.feed(std::string(kDsmlCallsOpen)));
  EXPECT_FALSE(m.done());  // inside the block, the output may not end
}

TEST(ToolGrammar, EqualStatesHaveEqualKeys) {
  const ToolGrammar g = ToolGrammar::compile(kTools);
  const std::string in = block({}).substr(0, kDsmlCallsOpen.size() + 1) +
                         std::string(kDsmlInvokeOpen) + "get_weather\">\n" +
                         std::string(kDsmlParamOpen) + "city\" string=\"true\">";
  ToolCallMatcher a(&g, CallStart::kBlock), b(&g, CallStart::kBlock);
  ASSERT_TRUE(a.feed(in + "Paris"));
  ASSERT_TRUE(b.feed(in + "Rome and more"));
  EXPECT_EQ(a.key(), b.key());  // the inside of a raw value is one state (one cached mask)
  ASSERT_TRUE(b.feed(std::string("</")));
  EXPECT_NE(a.key(), b.key());
}

TEST(ToolGrammar, InsideABlockThePromptOpenedTheInvokesComeFirst) {
  const ToolGrammar g = ToolGrammar::compile(kTools);
  const std::string whole = block({invoke("get", {})});
  const std::string rest = whole.substr(kDsmlCallsOpen.size() + 1);  // after "<calls>\n"
  bool done = false;
  EXPECT_EQ(accepted(g, rest, CallStart::kInsideBlock, &done), rest.size());
  EXPECT_TRUE(done);
  EXPECT_LT(accepted(g, whole, CallStart::kInsideBlock), kDsmlCallsOpen.size());  // no 2nd tag
  EXPECT_EQ(accepted(g, "text", CallStart::kInsideBlock), 0u);
}

TEST(ToolGrammar, AStrictToolMustBeEnforceableOthersGetAnyValue) {
  EXPECT_THROW(ToolGrammar::compile(ojson::parse(
                   R"([{"function":{"name":"f","strict":true,"parameters":{"properties":{
                       "a":{"not":{}}}}}}])")),
               RequestError);
  // not strict: the parameter takes raw text or any JSON value
  const ToolGrammar g = ToolGrammar::compile(
      ojson::parse(R"([{"function":{"name":"f","parameters":{"properties":{"a":{"not":{}}}}}}])"));
  for (const std::string& v :
       {param("a", true, "free <text>"), param("a", false, "[1,{\"k\":null}]")}) {
    const std::string text = block({invoke("f", {v})});
    EXPECT_EQ(accepted(g, text), text.size()) << v;
  }
  const std::string bad = block({invoke("f", {param("a", false, "[1,")})});
  EXPECT_LT(accepted(g, bad), bad.size());  // still JSON
}

TEST(ToolGrammar, RefusesSchemasItCannotEnforce) {
  EXPECT_THROW(ToolGrammar::compile(ojson::parse(R"([{"function":{"name":"a b"}}])")),
               RequestError);
  EXPECT_THROW(
      ToolGrammar::compile(ojson::parse(
          R"([{"function":{"name":"f","parameters":{"properties":{},"required":["x"]}}}])")),
      RequestError);
}

}  // namespace
}  // namespace cedar::text
