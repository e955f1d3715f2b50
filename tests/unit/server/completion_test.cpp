// The API-neutral output pipeline (server/completion.h) and the request option validation
// (server/request_options.h).
#include "server/completion.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/request_options.h"

namespace cedar::server {
namespace {

using K = CompletionEvent::Kind;

CompletionSetup thinking_setup(std::vector<std::string> stop = {}, ojson tools = ojson::array()) {
  CompletionSetup s;
  s.parser.start = text::GenerationStart::kReasoning;
  s.parser.tools = tools;
  s.parser.parse_tool_calls = !tools.empty();
  s.parser.id_prefix = "call_x_";
  s.stop = std::move(stop);
  return s;
}

// Feeds `text` one byte at a time (the worst chunking) and returns the events.
std::vector<CompletionEvent> feed_bytes(CompletionPipeline& p, const std::string& text) {
  std::vector<CompletionEvent> ev;
  for (char c : text) p.on_text(std::string(1, c), &ev);
  p.finish(Finish::kStop, &ev);
  return ev;
}

std::string joined(const std::vector<CompletionEvent>& ev, K kind) {
  std::string s;
  for (const auto& e : ev)
    if (e.kind == kind) s += e.text;
  return s;
}

TEST(CompletionPipeline, ReasoningThenContent) {
  CompletionPipeline p(thinking_setup());
  const auto ev = feed_bytes(p, "Let me see.</think>The answer.");
  EXPECT_EQ(joined(ev, K::kReasoning), "Let me see.");
  EXPECT_EQ(joined(ev, K::kContent), "The answer.");
  // Every reasoning event precedes every content event.
  bool seen_content = false;
  for (const auto& e : ev) {
    if (e.kind == K::kContent) seen_content = true;
    if (e.kind == K::kReasoning) {
      EXPECT_FALSE(seen_content);
    }
  }
  EXPECT_EQ(p.outcome().reasoning, "Let me see.");
  EXPECT_EQ(p.outcome().content, "The answer.");
  EXPECT_TRUE(p.outcome().thinking);
  EXPECT_EQ(p.outcome().finish, Finish::kStop);
}

TEST(CompletionPipeline, StopSequenceMatchesAnswerTextOnly) {
  CompletionPipeline p(thinking_setup({"END"}));
  std::vector<CompletionEvent> ev;
  EXPECT_FALSE(p.on_text("reason END reason</think>ans", &ev));
  EXPECT_FALSE(p.on_text("wer E", &ev));
  EXPECT_TRUE(p.on_text("ND more", &ev));  // the match spans two chunks
  EXPECT_TRUE(p.stopped());
  p.finish(Finish::kCancelled, &ev);  // the engine was halted because of the stop
  EXPECT_EQ(joined(ev, K::kReasoning), "reason END reason");
  EXPECT_EQ(joined(ev, K::kContent), "answer ");
  EXPECT_EQ(p.outcome().finish, Finish::kStop);
  EXPECT_EQ(p.outcome().stop_sequence, "END");
}

TEST(CompletionPipeline, PartialStopIsReleasedAtTheEnd) {
  CompletionPipeline p(thinking_setup({"STOP!"}));
  const auto ev = feed_bytes(p, "</think>it is STO");
  EXPECT_EQ(joined(ev, K::kContent), "it is STO");
  EXPECT_FALSE(p.stopped());
}

TEST(CompletionPipeline, ToolCallEventsAndFinishReason) {
  const ojson tools = ojson::parse(
      R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
      "properties":{"city":{"type":"string"},"days":{"type":"integer"}}}}}])");
  CompletionPipeline p(thinking_setup({}, tools));
  const std::string text =
      "hmm</think>Checking.\n\n<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"get_weather\">\n"
      "<｜DSML｜ parameter name=\"city\" string=\"true\">Paris</｜DSML｜ parameter>\n"
      "<｜DSML｜ parameter name=\"days\" string=\"false\">3</｜DSML｜ parameter>\n"
      "</｜DSML｜ invoke>\n</｜DSML｜ calls>";
  const auto ev = feed_bytes(p, text);
  std::vector<K> order;
  for (const auto& e : ev)
    if (order.empty() || order.back() != e.kind) order.push_back(e.kind);
  EXPECT_EQ(order,
            (std::vector<K>{K::kReasoning, K::kContent, K::kToolBegin, K::kToolArgs, K::kToolEnd}));
  const Outcome& o = p.outcome();
  ASSERT_EQ(o.tool_calls.size(), 1u);
  EXPECT_EQ(o.tool_calls[0].id, "call_x_0");
  EXPECT_EQ(o.tool_calls[0].name, "get_weather");
  EXPECT_EQ(ojson::parse(o.tool_calls[0].arguments), ojson::parse(R"({"city":"Paris","days":3})"));
  EXPECT_EQ(o.content, "Checking.");
  EXPECT_EQ(o.finish, Finish::kToolCalls);
  for (const auto& e : ev) EXPECT_EQ(e.text.find("DSML"), std::string::npos);
}

TEST(CompletionPipeline, LengthIsKeptAndRawModeDoesNotParse) {
  CompletionSetup s;
  s.raw = true;
  CompletionPipeline p(s);
  std::vector<CompletionEvent> ev;
  p.on_text("a </think> <｜DSML｜ calls> b", &ev);
  p.finish(Finish::kLength, &ev);
  EXPECT_EQ(joined(ev, K::kContent), "a </think> <｜DSML｜ calls> b");
  EXPECT_FALSE(p.outcome().thinking);
  EXPECT_EQ(p.outcome().finish, Finish::kLength);
}

TEST(CompletionPipeline, ReasoningTokensCountUpToThinkEnd) {
  CompletionPipeline p(thinking_setup());
  const int32_t think_end = 99;
  for (int32_t id : {5, 6, 99, 7, 8, 1}) p.on_token(id, think_end);
  EXPECT_EQ(p.outcome().usage.completion_tokens, 6);
  EXPECT_EQ(p.outcome().usage.reasoning_tokens, 3);
}

TEST(Usage, OpenAIFieldsAreConsistent) {
  Usage u;
  u.prompt_tokens = 100;
  u.cached_tokens = 64;
  u.completion_tokens = 10;
  u.reasoning_tokens = 4;
  const ojson j = u.openai();
  EXPECT_EQ(j["total_tokens"], 110);
  EXPECT_EQ(j["prompt_cache_hit_tokens"], 64);
  EXPECT_EQ(j["prompt_cache_miss_tokens"], 36);
  EXPECT_EQ(j["prompt_tokens_details"]["cached_tokens"], 64);
  EXPECT_EQ(j["completion_tokens_details"]["reasoning_tokens"], 4);
}

std::string error_of(const std::string& body) {
  try {
    parse_request_options(ojson::parse(body), false);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.what();
  }
  return "";
}

TEST(RequestOptions, ValidationMessages) {
  EXPECT_EQ(error_of(R"({"temperature": 2.5})"), "temperature must be in [0, 2]");
  EXPECT_EQ(error_of(R"({"temperature": "1"})"), "temperature must be a number");
  EXPECT_EQ(error_of(R"({"top_p": 0})"), "top_p must be in (0, 1]");
  EXPECT_EQ(error_of(R"({"max_tokens": 0})"), "max_tokens must be greater than zero");
  EXPECT_EQ(error_of(R"({"max_tokens": 2.0})"), "max_tokens must be an integer");
  EXPECT_EQ(error_of(R"({"n": 3})"), "Invalid n value (currently only n = 1 is supported)");
  EXPECT_EQ(error_of(R"({"stream_options": {"include_usage": true}})"),
            "stream_options should be set along with stream = true");
  EXPECT_EQ(error_of(R"({"stop": ["a","b","c","d","e","f","g","h","i","j","k","l","m","n","o",
                         "p","q"]})"),
            "ChatCompletionStopSequences string array too long: 17");
  EXPECT_EQ(error_of(R"({"stop": 5})"), "stop must be a string or an array of strings");
  EXPECT_EQ(error_of(R"({"presence_penalty": -3})"), "presence_penalty must be in [-2, 2]");
  EXPECT_NE(error_of(R"({"cedar_test_output": "x"})").find("--enable-test-hooks"),
            std::string::npos);
  EXPECT_EQ(error_of(R"({"stream": 1})"), "stream must be a boolean");
}

TEST(RequestOptions, Values) {
  const auto o =
      parse_request_options(ojson::parse(R"({"temperature": 0, "top_p": 0.5, "max_tokens": 10,
                       "max_completion_tokens": 7, "stop": "x", "stream": true,
                       "stream_options": {"include_usage": true}, "seed": 42,
                       "cedar_test_output": "t"})"),
                            true);
  EXPECT_EQ(o.sampling.temperature, 0.0);
  EXPECT_EQ(o.sampling.top_p, 0.5);
  EXPECT_EQ(*o.max_tokens, 7);  // the smaller of the two
  EXPECT_EQ(o.stop, std::vector<std::string>{"x"});
  EXPECT_TRUE(o.stream);
  EXPECT_TRUE(o.include_usage);
  EXPECT_EQ(*o.sampling.seed, 42u);
  EXPECT_EQ(*o.test_output, "t");
}

}  // namespace
}  // namespace cedar::server
