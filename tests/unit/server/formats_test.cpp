// Wire formats (OpenAI chunks, Anthropic events, Responses events) and the request conversions
// of the Anthropic and Responses front ends.
#include <gtest/gtest.h>

#include <algorithm>
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
  EXPECT_NE(err(R"({"max_tokens": 1, "messages": [{"role":"tool","content":"x"}]})").find("role"),
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
  const ojson c = responses_to_chat(body).chat;
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
  ResponsesFormat f("resp_abc", "m", 1, ojson::parse(R"({"input":"x"})"), ResponsesRequest{});
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

// What Claude Code sends: a system turn after the first user turn (its environment block),
// documents and search results as text, a PDF refused by name, and the fields it cannot have
// honoured named in the log.
TEST(AnthropicToChat, SystemTurnsDocumentsSearchResultsAndWarnings) {
  std::vector<std::string> warned;
  const Warn warn = [&](const std::string& m) { warned.push_back(m); };
  const ojson body = ojson::parse(R"({
    "model": "m", "max_tokens": 10,
    "thinking": {"type": "adaptive", "display": "omitted", "budget_tokens": 99},
    "output_config": {"effort": "high",
                      "format": {"type": "json_schema", "schema": {"type": "object"}}},
    "tools": [{"name": "t", "input_schema": {"type": "object"}, "defer_loading": true}],
    "messages": [
      {"role": "user", "content": [{"type": "text", "text": "q"},
        {"type": "document", "title": "Notes", "context": "from the user",
         "source": {"type": "text", "media_type": "text/plain", "data": "D1"}},
        {"type": "document", "source": {"type": "content", "content": [
          {"type": "text", "text": "A"}, {"type": "text", "text": "B"}]}},
        {"type": "search_result", "source": "https://x.test/a", "title": "T",
         "content": [{"type": "text", "text": "S"}]}]},
      {"role": "system", "content": [{"type": "text", "text": "env", "cache_control": {}}]}]})");
  const ojson c = anthropic_to_chat(body, warn);
  const ojson& m = c["messages"];
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0]["content"][1]["text"], "Document: Notes\n\nfrom the user\n\nD1");
  EXPECT_EQ(m[0]["content"][2]["text"], "A\n\nB");
  EXPECT_EQ(m[0]["content"][3]["text"], "Search result: T\nSource: https://x.test/a\n\nS");
  EXPECT_EQ(m[1], ojson::parse(R"({"role": "system", "content": "env"})"));
  EXPECT_EQ(c["reasoning_effort"], "high");
  EXPECT_EQ(c["response_format"]["json_schema"]["schema"], ojson::parse(R"({"type":"object"})"));
  EXPECT_EQ(c["thinking"]["type"], "adaptive");
  // warned once per process: the three show up the first time this test runs
  std::string all;
  for (const auto& w : warned) all += w + "\n";
  for (const char* f : {"budget_tokens", "thinking.display", "defer_loading"})
    EXPECT_NE(all.find(f), std::string::npos) << all;

  auto err =
      [&](const char* blocks) {
        try {
          anthropic_to_chat(ojson::parse(std::string(R"({"max_tokens": 1, "messages": [{"role":
        "user", "content": )") + blocks + "}]}"));
        } catch (const ApiError& e) {
          return std::string(e.what()) + " @" + e.param();
        }
        return std::string();
      };
  const std::string pdf = err(R"([{"type": "document", "source": {"type": "base64",
    "media_type": "application/pdf", "data": "JVBERi0="}}])");
  EXPECT_NE(pdf.find("messages[0].content[0]"), std::string::npos) << pdf;
  EXPECT_NE(pdf.find("application/pdf"), std::string::npos) << pdf;
  EXPECT_NE(err(R"([{"type": "tool_result", "tool_use_id": "x", "content": [{"type":
    "document", "source": {"type": "url", "url": "https://x.test/a.pdf"}}]}])")
                .find("content[0].content[0]"),
            std::string::npos);
  EXPECT_NE(err(R"([{"type": "search_result", "title": "T", "content": []}])").find("source"),
            std::string::npos);
}

// What Codex sends: sub-agent tools grouped in a namespace, reasoning summaries asked for,
// reasoning carried in encrypted_content; and the other Responses shapes clients send.
TEST(ResponsesToChat, NamespacesCustomAndLocalShellTools) {
  const ResponsesRequest r = responses_to_chat(ojson::parse(R"({
    "model": "m", "reasoning": {"summary": "auto"}, "include": ["reasoning.encrypted_content"],
    "tools": [
      {"type": "function", "name": "exec", "parameters": {"type": "object"}},
      {"type": "namespace", "name": "agents", "description": "sub-agents", "tools": [
        {"type": "function", "name": "spawn", "parameters": {"type": "object"}},
        {"type": "function", "name": "exec", "parameters": {"type": "object"}}]},
      {"type": "custom", "name": "apply_patch", "description": "patch",
       "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"}},
      {"type": "local_shell"}],
    "input": [
      {"type": "message", "role": "user", "content": "go"},
      {"type": "reasoning", "summary": [{"type": "summary_text", "text": "short"}],
       "encrypted_content": "cedar-reasoning-text:full thought"},
      {"type": "function_call", "call_id": "c1", "name": "spawn", "namespace": "agents",
       "arguments": "{}"},
      {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "*** x"},
      {"type": "local_shell_call", "id": "ls1", "call_id": "c3", "status": "completed",
       "action": {"type": "exec", "command": ["ls", "-l"]}},
      {"type": "function_call_output", "call_id": "c1", "output": "o1"},
      {"type": "custom_tool_call_output", "call_id": "c2", "output": "o2"},
      {"type": "local_shell_call_output", "id": "c3", "output": "o3"},
      {"type": "compaction", "encrypted_content": "earlier: we wrote a file"},
      {"type": "item_reference", "id": "ls1"}]})"));
  EXPECT_TRUE(r.summary);
  EXPECT_TRUE(r.encrypted_reasoning);
  const ojson& tools = r.chat["tools"];
  std::vector<std::string> names;
  for (const auto& t : tools) names.push_back(t["function"]["name"].get<std::string>());
  // the namespace's "exec" collides with the top-level one; its "spawn" keeps its own name
  EXPECT_EQ(names, (std::vector<std::string>{"exec", "spawn", "agents__exec", "apply_patch",
                                             "local_shell"}));
  EXPECT_EQ(r.tools.at("agents__exec").ns, "agents");
  EXPECT_EQ(r.tools.at("agents__exec").name, "exec");
  EXPECT_EQ(r.tools.at("apply_patch").kind, ResponsesTool::Kind::kCustom);
  EXPECT_EQ(tools[3]["function"]["parameters"]["required"], ojson::parse(R"(["input"])"));
  EXPECT_EQ(r.tools.at("local_shell").kind, ResponsesTool::Kind::kLocalShell);

  const ojson& m = r.chat["messages"];
  ASSERT_EQ(m.size(), 7u) << m.dump(1);
  EXPECT_EQ(m[1]["reasoning_content"], "full thought");  // the carried text, not the summary
  const ojson& calls = m[1]["tool_calls"];
  ASSERT_EQ(calls.size(), 3u);
  EXPECT_EQ(calls[0]["function"]["name"], "spawn");
  EXPECT_EQ(calls[1]["function"]["arguments"], R"({"input":"*** x"})");
  EXPECT_EQ(calls[2]["function"]["name"], "local_shell");
  EXPECT_EQ(calls[2]["function"]["arguments"], R"({"command":["ls","-l"]})");
  EXPECT_EQ(m[4]["tool_call_id"], "c3");
  EXPECT_EQ(m[5]["role"], "system");
  EXPECT_EQ(m[5]["content"], "Summary of the earlier conversation:\n\nearlier: we wrote a file");
  // the reference stands for the local_shell call it names, in its own place
  EXPECT_EQ(m[6]["tool_calls"][0]["id"], "c3");
}

TEST(ResponsesToChat, ReferencesToolChoiceAndRefusals) {
  auto err = [](const char* body) {
    try {
      responses_to_chat(ojson::parse(body));
    } catch (const ApiError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(err(R"({"input": [{"type": "item_reference", "id": "rs_gone"}]})").find("rs_gone"),
            std::string::npos);
  EXPECT_NE(err(R"({"input": "x", "conversation": "c1"})").find("stores no responses"),
            std::string::npos);
  EXPECT_NE(err(R"({"input": "x", "tools": [{"type": "file_search"}]})").find("file_search"),
            std::string::npos);
  EXPECT_NE(err(R"({"input": "x", "reasoning": {"summary": "all"}})").find("reasoning.summary"),
            std::string::npos);
  const ResponsesRequest r = responses_to_chat(ojson::parse(R"({"input": "x",
    "tools": [{"type": "function", "name": "a"}, {"type": "function", "name": "b"},
              {"type": "custom", "name": "c"}],
    "tool_choice": {"type": "allowed_tools", "mode": "required",
                    "tools": [{"type": "function", "name": "b"}, {"type": "custom", "name": "c"}]}})"));
  ASSERT_EQ(r.chat["tools"].size(), 2u);
  EXPECT_EQ(r.chat["tools"][0]["function"]["name"], "b");
  EXPECT_EQ(r.chat["tool_choice"], "required");
  const ResponsesRequest named = responses_to_chat(ojson::parse(R"({"input": "x",
    "tools": [{"type": "custom", "name": "c"}], "tool_choice": {"type": "custom", "name": "c"}})"));
  EXPECT_EQ(named.chat["tool_choice"]["function"]["name"], "c");
}

// Calls go back to the client as the kind of tool it declared: function calls with their
// namespace, custom tool calls with their input, local_shell calls with their action; reasoning
// with its summary and carried text when asked for.
TEST(ResponsesFormat, ToolKindsSummaryAndCarriedReasoning) {
  const ojson request = ojson::parse(R"({"input": "x", "reasoning": {"summary": "auto"},
    "include": ["reasoning.encrypted_content"],
    "tools": [{"type": "namespace", "name": "agents", "tools": [
                {"type": "function", "name": "spawn"}]},
              {"type": "custom", "name": "apply_patch"}, {"type": "local_shell"}]})");
  const ResponsesRequest req = responses_to_chat(request);
  ResponsesFormat f("resp_abc", "m", 1, request, req);
  std::string out;
  f.event(ev(K::kStarted), nullptr, &out);
  f.event(ev(K::kReasoning, "think"), nullptr, &out);
  f.event(ev(K::kToolBegin, "", 0, "call_0", "spawn"), nullptr, &out);
  f.event(ev(K::kToolArgs, "{\"task\": \"t\"}", 0), nullptr, &out);
  f.event(ev(K::kToolEnd, "", 0), nullptr, &out);
  f.event(ev(K::kToolBegin, "", 1, "call_1", "apply_patch"), nullptr, &out);
  f.event(ev(K::kToolArgs, "{\"input\": \"*** ", 1), nullptr, &out);
  f.event(ev(K::kToolArgs, "patch\"}", 1), nullptr, &out);
  f.event(ev(K::kToolEnd, "", 1), nullptr, &out);
  f.event(ev(K::kToolBegin, "", 2, "call_2", "local_shell"), nullptr, &out);
  f.event(ev(K::kToolArgs, "{\"command\": [\"ls\"]}", 2), nullptr, &out);
  f.event(ev(K::kToolEnd, "", 2), nullptr, &out);
  Outcome o = outcome(Finish::kToolCalls);
  o.thinking = true;
  o.reasoning = "think";
  o.tool_calls = {{"call_0", "spawn", "{\"task\": \"t\"}"},
                  {"call_1", "apply_patch", "{\"input\": \"*** patch\"}"},
                  {"call_2", "local_shell", "{\"command\": [\"ls\"]}"}};
  f.event(ev(K::kDone), &o, &out);
  std::vector<std::string> types;
  ojson last;
  for (const auto& fr : frames(out)) {
    types.push_back(fr.event);
    last = ojson::parse(fr.data);
  }
  auto count = [&](const char* t) { return std::count(types.begin(), types.end(), t); };
  EXPECT_EQ(count("response.reasoning_summary_part.added"), 1);
  EXPECT_EQ(count("response.reasoning_summary_text.delta"), 1);
  EXPECT_EQ(count("response.reasoning_summary_text.done"), 1);
  EXPECT_EQ(count("response.reasoning_summary_part.done"), 1);
  EXPECT_EQ(count("response.custom_tool_call_input.delta"), 1);
  EXPECT_EQ(count("response.custom_tool_call_input.done"), 1);
  EXPECT_EQ(count("response.output_item.done"), 4);
  const ojson& streamed = last["response"]["output"];
  const ojson whole = f.body(o)["output"];
  for (const ojson* output : {&streamed, &whole}) {
    const ojson& items = *output;
    ASSERT_EQ(items.size(), 4u) << items.dump(1);
    EXPECT_EQ(items[0]["summary"][0]["text"], "think");
    EXPECT_EQ(items[0]["encrypted_content"], "cedar-reasoning-text:think");
    EXPECT_EQ(items[1]["type"], "function_call");
    EXPECT_EQ(items[1]["name"], "spawn");
    EXPECT_EQ(items[1]["namespace"], "agents");
    EXPECT_EQ(items[2]["type"], "custom_tool_call");
    EXPECT_EQ(items[2]["input"], "*** patch");
    EXPECT_EQ(items[3]["type"], "local_shell_call");
    EXPECT_EQ(items[3]["action"], ojson::parse(R"({"type": "exec", "command": ["ls"]})"));
  }
  // sent back as input, the items restore the same conversation
  ojson again = request;
  again["input"] = ojson::array({ojson{{"role", "user"}, {"content", "x"}}});
  for (const auto& it : whole) again["input"].push_back(it);
  const ojson m = responses_to_chat(again).chat["messages"];
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[1]["reasoning_content"], "think");
  EXPECT_EQ(m[1]["tool_calls"].size(), 3u);
}

}  // namespace
}  // namespace cedar::server
