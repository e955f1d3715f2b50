// Wire formats (OpenAI chunks, Anthropic events, Responses events) and the request conversions
// of the Anthropic and Responses front ends.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/anthropic_api.h"
#include "server/openai_api.h"
#include "server/responses_api.h"
#include "server/sse.h"

namespace cedar::server {
namespace {

using K = CompletionEvent::Kind;

CompletionEvent ev(K k, std::string text = {}, int index = -1, std::string id = {},
                   std::string name = {}) {
  CompletionEvent e;
  e.kind = k;
  e.text = std::move(text);
  e.index = index;
  e.id = std::move(id);
  e.name = std::move(name);
  return e;
}

struct Frame {
  std::string event;
  std::string data;
};

std::vector<Frame> frames(const std::string& sse) {
  std::vector<Frame> out;
  size_t pos = 0;
  while (pos < sse.size()) {
    const size_t end = sse.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << "unterminated frame";
    if (end == std::string::npos) break;
    const std::string block = sse.substr(pos, end - pos);
    pos = end + 2;
    Frame f;
    size_t lp = 0;
    while (lp <= block.size()) {
      size_t le = block.find('\n', lp);
      if (le == std::string::npos) le = block.size();
      const std::string line = block.substr(lp, le - lp);
      if (line.rfind("event: ", 0) == 0) f.event = line.substr(7);
      if (line.rfind("data: ", 0) == 0) f.data = line.substr(6);
      lp = le + 1;
    }
    out.push_back(f);
  }
  return out;
}

Outcome outcome(Finish f) {
  Outcome o;
  o.finish = f;
  o.usage.prompt_tokens = 10;
  o.usage.cached_tokens = 4;
  o.usage.completion_tokens = 5;
  return o;
}

TEST(Sse, Framing) {
  EXPECT_EQ(sse_data(ojson{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(sse_event("ping", ojson{{"type", "ping"}}),
            "event: ping\ndata: {\"type\":\"ping\"}\n\n");
  EXPECT_EQ(sse_comment("keep\nalive"), ": keep alive\n\n");
  // Invalid UTF-8 never throws.
  EXPECT_NO_THROW(json_text(ojson(std::string("\xff"))));
}

TEST(ChatCompletionFormat, ThinkingChunkOrderAndUsage) {
  ChatCompletionFormat f("chatcmpl-1", "m", 1, /*thinking=*/true, /*include_usage=*/true);
  std::string out;
  f.event(ev(K::kStarted), nullptr, &out);
  f.event(ev(K::kReasoning, "r"), nullptr, &out);
  f.event(ev(K::kContent, "c"), nullptr, &out);
  f.event(ev(K::kToolBegin, "", 0, "call_1", "fn"), nullptr, &out);
  f.event(ev(K::kToolArgs, "{}", 0), nullptr, &out);
  const Outcome o = outcome(Finish::kToolCalls);
  f.event(ev(K::kDone), &o, &out);
  const auto fr = frames(out);
  ASSERT_EQ(fr.size(), 7u);
  EXPECT_EQ(fr.back().data, "[DONE]");
  std::vector<ojson> c;
  for (size_t i = 0; i + 1 < fr.size(); ++i) c.push_back(ojson::parse(fr[i].data));
  EXPECT_EQ(c[0]["choices"][0]["delta"],
            ojson::parse(R"({"role":"assistant","content":null,"reasoning_content":""})"));
  EXPECT_EQ(c[1]["choices"][0]["delta"],
            ojson::parse(R"({"content":null,"reasoning_content":"r"})"));
  EXPECT_EQ(c[2]["choices"][0]["delta"],
            ojson::parse(R"({"content":"c","reasoning_content":null})"));
  EXPECT_EQ(c[3]["choices"][0]["delta"]["tool_calls"][0],
            ojson::parse(R"({"index":0,"id":"call_1","type":"function",
                             "function":{"name":"fn","arguments":""}})"));
  EXPECT_EQ(c[4]["choices"][0]["delta"]["tool_calls"][0],
            ojson::parse(R"({"index":0,"function":{"arguments":"{}"}})"));
  EXPECT_EQ(c[5]["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(c[5]["usage"]["prompt_cache_hit_tokens"], 4);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_TRUE(c[i]["usage"].is_null()) << "include_usage: null usage before the last chunk";
    EXPECT_TRUE(c[i]["choices"][0]["finish_reason"].is_null());
  }
}

TEST(ChatCompletionFormat, ChatModeWithoutIncludeUsage) {
  ChatCompletionFormat f("id", "m", 1, /*thinking=*/false, /*include_usage=*/false);
  std::string out;
  f.event(ev(K::kStarted), nullptr, &out);
  f.event(ev(K::kContent, "hi"), nullptr, &out);
  const Outcome o = outcome(Finish::kStop);
  f.event(ev(K::kDone), &o, &out);
  const auto fr = frames(out);
  ASSERT_EQ(fr.size(), 4u);
  const ojson first = ojson::parse(fr[0].data);
  EXPECT_EQ(first["choices"][0]["delta"], ojson::parse(R"({"role":"assistant","content":""})"));
  EXPECT_FALSE(first.contains("usage"));
  EXPECT_EQ(ojson::parse(fr[1].data)["choices"][0]["delta"], ojson::parse(R"({"content":"hi"})"));
  EXPECT_TRUE(ojson::parse(fr[2].data).contains("usage"));
}

TEST(ChatCompletionFormat, ErrorFrameAndBody) {
  ChatCompletionFormat f("id", "m", 1, true, false);
  std::string out;
  Outcome o = outcome(Finish::kError);
  o.error = "boom";
  f.event(ev(K::kDone), &o, &out);
  const auto fr = frames(out);
  ASSERT_EQ(fr.size(), 2u);
  EXPECT_EQ(ojson::parse(fr[0].data)["error"]["message"], "boom");

  Outcome ok = outcome(Finish::kToolCalls);
  ok.thinking = true;
  ok.reasoning = "r";
  ok.tool_calls.push_back({"call_0", "fn", R"({"a": 1})"});
  const ojson b = f.body(ok);
  EXPECT_EQ(b["object"], "chat.completion");
  EXPECT_TRUE(b["choices"][0]["message"]["content"].is_null());
  EXPECT_EQ(b["choices"][0]["message"]["reasoning_content"], "r");
  EXPECT_EQ(b["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], R"({"a": 1})");
  EXPECT_EQ(b["choices"][0]["finish_reason"], "tool_calls");
}

TEST(AnthropicFormat, EventOrder) {
  AnthropicFormat f("msg_1", "m");
  std::string out;
  CompletionEvent start = ev(K::kStarted);
  start.usage.prompt_tokens = 10;
  start.usage.cached_tokens = 4;
  f.event(start, nullptr, &out);
  f.event(ev(K::kReasoning, "r"), nullptr, &out);
  f.event(ev(K::kContent, "c"), nullptr, &out);
  f.event(ev(K::kToolBegin, "", 0, "toolu_1", "fn"), nullptr, &out);
  f.event(ev(K::kToolArgs, "{\"a\": 1}", 0), nullptr, &out);
  f.event(ev(K::kToolEnd, "", 0), nullptr, &out);
  const Outcome o = outcome(Finish::kToolCalls);
  f.event(ev(K::kDone), &o, &out);
  std::vector<std::string> types;
  for (const auto& fr : frames(out)) {
    const ojson d = ojson::parse(fr.data);
    EXPECT_EQ(fr.event, d["type"]);
    std::string t = d["type"];
    if (d.contains("delta") && d["delta"].contains("type"))
      t += ":" + d["delta"]["type"].get<std::string>();
    if (d.contains("content_block")) t += ":" + d["content_block"]["type"].get<std::string>();
    types.push_back(t);
    if (d["type"] == "message_start") {
      EXPECT_EQ(d["message"]["usage"]["input_tokens"], 6);
      EXPECT_EQ(d["message"]["usage"]["cache_read_input_tokens"], 4);
    }
    if (d["type"] == "message_delta") {
      EXPECT_EQ(d["delta"]["stop_reason"], "tool_use");
    }
  }
  EXPECT_EQ(types, (std::vector<std::string>{
                       "message_start", "content_block_start:thinking", "ping",
                       "content_block_delta:thinking_delta", "content_block_delta:signature_delta",
                       "content_block_stop", "content_block_start:text",
                       "content_block_delta:text_delta", "content_block_stop",
                       "content_block_start:tool_use", "content_block_delta:input_json_delta",
                       "content_block_stop", "message_delta", "message_stop"}));
}

TEST(AnthropicFormat, Body) {
  AnthropicFormat f("msg_1", "m");
  Outcome o = outcome(Finish::kStop);
  o.thinking = true;
  o.reasoning = "r";
  o.content = "text";
  o.stop_sequence = "##";
  const ojson b = f.body(o);
  EXPECT_EQ(b["content"][0]["type"], "thinking");
  EXPECT_EQ(b["content"][1], ojson::parse(R"({"type":"text","text":"text"})"));
  EXPECT_EQ(b["stop_reason"], "stop_sequence");
  EXPECT_EQ(b["stop_sequence"], "##");
}

TEST(AnthropicToChat, Conversion) {
  const ojson body = ojson::parse(R"({
    "model": "claude-x", "max_tokens": 100, "stop_sequences": ["##"],
    "system": [{"type": "text", "text": "S1"}, {"type": "text", "text": "S2"}],
    "thinking": {"type": "enabled", "budget_tokens": 10},
    "tools": [{"name": "get", "description": "d", "input_schema": {"type": "object"}}],
    "tool_choice": {"type": "any"},
    "messages": [
      {"role": "user", "content": "q"},
      {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "t1", "signature": "s"},
        {"type": "text", "text": "calling"},
        {"type": "tool_use", "id": "toolu_1", "name": "get", "input": {"k": "v"}}]},
      {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_1", "content": "result"},
        {"type": "text", "text": "thanks"}]},
      {"role": "assistant", "content": "prefill"}]})");
  const ojson c = anthropic_to_chat(body);
  EXPECT_EQ(c["max_tokens"], 100);
  EXPECT_EQ(c["stop"], ojson::parse(R"(["##"])"));
  EXPECT_EQ(c["thinking"], ojson::parse(R"({"type":"enabled"})"));
  EXPECT_EQ(c["tool_choice"], "required");
  EXPECT_EQ(c["tools"][0]["function"]["parameters"], ojson::parse(R"({"type":"object"})"));
  const ojson& m = c["messages"];
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[0], ojson::parse(R"({"role":"system","content":"S1\n\nS2"})"));
  EXPECT_EQ(m[2]["reasoning_content"], "t1");
  EXPECT_EQ(m[2]["content"], "calling");
  EXPECT_EQ(m[2]["tool_calls"][0]["function"]["arguments"], R"({"k":"v"})");
  EXPECT_EQ(m[3], ojson::parse(R"({"role":"tool","tool_call_id":"toolu_1","content":"result"})"));
  EXPECT_EQ(m[4]["role"], "user");
  EXPECT_EQ(m[5]["prefix"], true);
}

TEST(AnthropicToChat, Errors) {
  auto err = [](const char* body) {
    try {
      anthropic_to_chat(ojson::parse(body));
    } catch (const ApiError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_EQ(err(R"({"messages": [{"role":"user","content":"x"}]})"), "max_tokens: Field required");
  EXPECT_NE(err(R"({"max_tokens": 1, "messages": []})").find("messages"), std::string::npos);
  EXPECT_NE(err(R"({"max_tokens": 1, "messages": [{"role":"system","content":"x"}]})").find("role"),
            std::string::npos);
  EXPECT_NE(err(R"({"max_tokens": 1, "messages": [{"role":"user","content":[{"type":"video"}]}]})")
                .find("\"video\" is not supported"),
            std::string::npos);
  EXPECT_NE(err(R"({"max_tokens": 1, "messages": [{"role":"user","content":"x"}],
                   "tools": [{"type": "web_search_20250305", "name": "w"}]})")
                .find("server tools"),
            std::string::npos);
}

TEST(ResponsesToChat, Conversion) {
  const ojson body = ojson::parse(R"({
    "model": "m", "instructions": "be nice", "max_output_tokens": 9,
    "reasoning": {"effort": "none"}, "text": {"format": {"type": "json_object"}},
    "tools": [{"type": "function", "name": "f", "parameters": {"type": "object"}},
              {"type": "web_search"}],
    "input": [
      {"role": "developer", "content": "dev"},
      {"role": "user", "content": [{"type": "input_text", "text": "q"}]},
      {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "r"}]},
      {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
      {"type": "function_call", "call_id": "c2", "name": "f", "arguments": "{\"a\":1}"},
      {"type": "function_call_output", "call_id": "c1", "output": "o1"},
      {"type": "function_call_output", "call_id": "c2", "output": "o2"}]})");
  const ojson c = responses_to_chat(body);
  EXPECT_EQ(c["max_tokens"], 9);
  EXPECT_EQ(c["reasoning_effort"], "none");
  EXPECT_EQ(c["response_format"], ojson::parse(R"({"type":"json_object"})"));
  ASSERT_EQ(c["tools"].size(), 1u);  // web_search is ignored
  const ojson& m = c["messages"];
  ASSERT_EQ(m.size(), 6u);
  EXPECT_EQ(m[0]["role"], "system");
  EXPECT_EQ(m[1]["role"], "system");  // developer
  EXPECT_EQ(m[2]["content"][0]["text"], "q");
  EXPECT_EQ(m[3]["role"], "assistant");
  EXPECT_EQ(m[3]["reasoning_content"], "r");
  EXPECT_EQ(m[3]["tool_calls"].size(), 2u);
  EXPECT_EQ(m[4]["tool_call_id"], "c1");
  EXPECT_EQ(m[5]["content"], "o2");
  EXPECT_THROW(responses_to_chat(ojson::parse(R"({"model":"m","input":"x",
                                                  "previous_response_id":"r"})")),
               ApiError);
  EXPECT_THROW(responses_to_chat(ojson::parse(R"({"model":"m"})")), ApiError);
}

TEST(ResponsesFormat, StreamEventsAndBody) {
  ResponsesFormat f("resp_abc", "m", 1, ojson::parse(R"({"input":"x"})"));
  std::string out;
  f.event(ev(K::kStarted), nullptr, &out);
  f.event(ev(K::kReasoning, "r"), nullptr, &out);
  f.event(ev(K::kContent, "c"), nullptr, &out);
  const Outcome o = outcome(Finish::kLength);
  f.event(ev(K::kDone), &o, &out);
  std::vector<std::string> types;
  int64_t seq = 0;
  ojson last;
  for (const auto& fr : frames(out)) {
    last = ojson::parse(fr.data);
    EXPECT_EQ(last["sequence_number"], seq++);
    types.push_back(fr.event);
  }
  EXPECT_EQ(types, (std::vector<std::string>{
                       "response.created", "response.in_progress", "response.output_item.added",
                       "response.content_part.added", "response.reasoning_text.delta",
                       "response.reasoning_text.done", "response.content_part.done",
                       "response.output_item.done", "response.output_item.added",
                       "response.content_part.added", "response.output_text.delta",
                       "response.output_text.done", "response.content_part.done",
                       "response.output_item.done", "response.incomplete"}));
  EXPECT_EQ(last["response"]["status"], "incomplete");
  EXPECT_EQ(last["response"]["output"][1]["content"][0]["text"], "c");
  EXPECT_EQ(last["response"]["usage"]["input_tokens_details"]["cached_tokens"], 4);
}

}  // namespace
}  // namespace cedar::server
