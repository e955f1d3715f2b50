#include "server/anthropic_api.h"

#include "base/json_limits.h"
#include "server/sse.h"

namespace cedar::server {

namespace {

constexpr const char* kSignature = "cedar-local";  // thinking blocks are not signed

// An Anthropic image block -> an OpenAI image_url part.
ojson image_part(const ojson& b, const std::string& where) {
  const auto it = b.find("source");
  if (it == b.end() || !it->is_object())
    throw ApiError(400, where + ".source: Field required", where + ".source");
  const ojson& src = *it;
  const std::string type = src.value("type", "");
  std::string url;
  if (type == "base64") {
    url = "data:" + string_field(src, "media_type", where + ".source") + ";base64," +
          string_field(src, "data", where + ".source");
  } else if (type == "url") {
    url = string_field(src, "url", where + ".source");
  } else {
    throw ApiError(400, where + ".source.type must be \"base64\" or \"url\"",
                   where + ".source.type");
  }
  return {{"type", "image_url"}, {"image_url", {{"url", url}}}};
}

// Text blocks (or a string) joined by "\n\n": a system prompt or a content source.
std::string joined_text(const ojson& v, const std::string& where) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array())
    throw ApiError(400, where + " must be a string or an array of text blocks", where);
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) {
    const ojson& b = v[i];
    const std::string w = indexed(where, i);
    if (!b.is_object() || b.value("type", "") != "text")
      throw ApiError(400, w + " must be a text block", w);
    if (i) s += "\n\n";
    s += string_field(b, "text", w);
  }
  return s;
}

void warn_citations(const ojson& b, const Warn& warn) {
  const auto c = b.find("citations");
  if (c != b.end() && c->is_object() && c->value("enabled", false))
    warn_once(warn, "messages:citations",
              "citations.enabled is not honoured: answers carry no citations");
}

// A document block as text: its title and context, then the text of a "text" or "content"
// source. PDFs, URLs and files are refused by name: this server extracts no PDF text and fetches
// nothing.
std::string document_text(const ojson& b, const std::string& where, const Warn& warn) {
  const auto it = b.find("source");
  if (it == b.end() || !it->is_object())
    throw ApiError(400, where + ".source: Field required", where + ".source");
  const std::string type = it->value("type", "");
  std::string body;
  if (type == "text") {
    body = string_field(*it, "data", where + ".source");
  } else if (type == "content") {
    const auto c = it->find("content");
    if (c == it->end())
      throw ApiError(400, where + ".source.content: Field required", where + ".source.content");
    body = joined_text(*c, where + ".source.content");
  } else {
    const std::string media = it->value("media_type", "");
    throw ApiError(400,
                   where + ": a document with a " + (type.empty() ? "missing" : type) + " source" +
                       (media.empty() ? "" : " (" + media + ")") +
                       " is not supported; send its text as a \"text\" source (this server does "
                       "not extract PDF text or fetch documents)",
                   where + ".source.type");
  }
  warn_citations(b, warn);
  std::string s;
  if (const auto t = b.find("title");
      t != b.end() && t->is_string() && !t->get_ref<const std::string&>().empty())
    s += "Document: " + t->get<std::string>() + "\n\n";
  if (const auto c = b.find("context");
      c != b.end() && c->is_string() && !c->get_ref<const std::string&>().empty())
    s += c->get<std::string>() + "\n\n";
  return s + body;
}

// A search_result block as text: its title and source, then its text blocks.
std::string search_result_text(const ojson& b, const std::string& where, const Warn& warn) {
  const std::string& title = string_field(b, "title", where);
  const std::string& source = string_field(b, "source", where);
  const auto c = b.find("content");
  if (c == b.end()) throw ApiError(400, where + ".content: Field required", where + ".content");
  warn_citations(b, warn);
  return "Search result: " + title + "\nSource: " + source + "\n\n" +
         joined_text(*c, where + ".content");
}

// A block of user content or of a tool result -> an OpenAI content part, or null for a block the
// caller handles itself (tool_result).
ojson user_part(const ojson& b, const std::string& where, const Warn& warn) {
  const std::string& t = block_type(b, where);
  if (t == "text") return {{"type", "text"}, {"text", string_field(b, "text", where)}};
  if (t == "image") return image_part(b, where);
  if (t == "document") return {{"type", "text"}, {"text", document_text(b, where, warn)}};
  if (t == "search_result") return {{"type", "text"}, {"text", search_result_text(b, where, warn)}};
  return ojson();
}

// tool_result content: string or blocks -> OpenAI tool message content.
ojson tool_result_content(const ojson& b, const std::string& where, const Warn& warn) {
  const auto it = b.find("content");
  if (it == b.end() || it->is_null()) return "";
  if (it->is_string()) return *it;
  if (!it->is_array())
    throw ApiError(400, where + ".content must be a string or an array of blocks",
                   where + ".content");
  ojson parts = ojson::array();
  for (size_t i = 0; i < it->size(); ++i) {
    const ojson& p = (*it)[i];
    const std::string w = indexed(where + ".content", i);
    ojson part = user_part(p, w, warn);
    if (part.is_null())
      throw ApiError(400,
                     w + ".type \"" + block_type(p, w) + "\" is not supported in a tool_result",
                     w + ".type");
    parts.push_back(std::move(part));
  }
  return parts;
}

ojson convert_tools(const ojson& tools, const Warn& warn) {
  if (!tools.is_array()) throw ApiError(400, "tools must be an array", "tools");
  ojson out = ojson::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const ojson& t = tools[i];
    const std::string w = indexed("tools", i);
    if (!t.is_object()) throw ApiError(400, w + " must be an object", w);
    if (t.contains("type") && t["type"].is_string() && t["type"] != "custom")
      throw ApiError(400,
                     w + ".type \"" + t["type"].get<std::string>() +
                         "\": server tools are not supported; define the tool with name, "
                         "description and input_schema",
                     w + ".type");
    if (t.value("defer_loading", false))
      warn_once(warn, "messages:tools.defer_loading",
                "tools[].defer_loading is not honoured: deferred tools are shown to the model "
                "with the others");
    ojson f = ojson::object();
    f["name"] = string_field(t, "name", w);
    if (t.contains("description")) f["description"] = t["description"];
    if (t.contains("input_schema")) f["parameters"] = t["input_schema"];
    if (t.contains("strict")) f["strict"] = t["strict"];
    out.push_back({{"type", "function"}, {"function", std::move(f)}});
  }
  return out;
}

ojson convert_tool_choice(const ojson& tc, const Warn& warn) {
  if (!tc.is_object() || !tc.contains("type") || !tc["type"].is_string())
    throw ApiError(400, "tool_choice must be an object with a string \"type\"", "tool_choice");
  if (tc.value("disable_parallel_tool_use", false))
    warn_once(warn, "messages:tool_choice.disable_parallel_tool_use",
              "tool_choice.disable_parallel_tool_use is not honoured: an answer may hold several "
              "tool calls");
  const std::string t = tc["type"].get<std::string>();
  if (t == "auto") return "auto";
  if (t == "any") return "required";
  if (t == "none") return "none";
  if (t == "tool")
    return {{"type", "function"},
            {"function", {{"name", string_field(tc, "name", "tool_choice")}}}};
  throw ApiError(400, "tool_choice.type must be \"auto\", \"any\", \"tool\" or \"none\"",
                 "tool_choice.type");
}

// thinking and output_config (effort, format) -> thinking, reasoning_effort, response_format.
void convert_output_settings(const ojson& body, ojson* chat, const Warn& warn) {
  // Thinking: explicit `thinking` wins over output_config.effort.
  if (const auto it = body.find("thinking"); it != body.end() && !it->is_null()) {
    if (!it->is_object() || !it->contains("type") || !(*it)["type"].is_string())
      throw ApiError(400, "thinking must be an object {\"type\": \"enabled\" | \"disabled\"}",
                     "thinking");
    (*chat)["thinking"] = {{"type", (*it)["type"]}};
    if (it->contains("budget_tokens"))
      warn_once(warn, "messages:thinking.budget_tokens",
                "thinking.budget_tokens is not enforced: the reasoning's length follows the "
                "effort (output_config.effort) and max_tokens");
    if (const auto d = it->find("display"); d != it->end() && d->is_string() && *d != "summarized")
      warn_once(warn, "messages:thinking.display",
                "thinking.display \"" + d->get<std::string>() +
                    "\" is not honoured: thinking blocks carry the reasoning text");
  }
  const auto oc = body.find("output_config");
  if (oc == body.end() || !oc->is_object()) return;
  if (const auto e = oc->find("effort"); e != oc->end() && !e->is_null())
    (*chat)["reasoning_effort"] = *e;
  if (const auto f = oc->find("format"); f != oc->end() && !f->is_null()) {
    if (!f->is_object() || f->value("type", "") != "json_schema" || !f->contains("schema"))
      throw ApiError(400,
                     "output_config.format must be {\"type\": \"json_schema\", \"schema\": {...}}",
                     "output_config.format");
    (*chat)["response_format"] = {
        {"type", "json_schema"}, {"json_schema", {{"name", "output"}, {"schema", (*f)["schema"]}}}};
  }
}

// A user message: tool_result blocks become tool messages (they answer the previous assistant
// turn), the other blocks one user message after them.
void convert_user(const ojson& content, const std::string& w, ojson* msgs, const Warn& warn) {
  if (content.is_string()) {
    msgs->push_back({{"role", "user"}, {"content", content}});
    return;
  }
  ojson parts = ojson::array();
  for (size_t j = 0; j < content.size(); ++j) {
    const ojson& b = content[j];
    const std::string wb = indexed(w + ".content", j);
    const std::string& t = block_type(b, wb);
    if (t == "tool_result") {
      msgs->push_back({{"role", "tool"},
                       {"tool_call_id", string_field(b, "tool_use_id", wb)},
                       {"content", tool_result_content(b, wb, warn)}});
      continue;
    }
    ojson part = user_part(b, wb, warn);
    if (part.is_null())
      throw ApiError(400, wb + ".type \"" + t + "\" is not supported in a user message",
                     wb + ".type");
    parts.push_back(std::move(part));
  }
  if (!parts.empty()) msgs->push_back({{"role", "user"}, {"content", std::move(parts)}});
}

// An assistant message; the last one, without tool calls, is continued (Anthropic prefill).
ojson convert_assistant(const ojson& content, const std::string& w, bool last) {
  ojson a = {{"role", "assistant"}};
  std::string text, reasoning;
  bool has_reasoning = false;
  ojson calls = ojson::array();
  if (content.is_string()) {
    text = content.get<std::string>();
  } else {
    for (size_t j = 0; j < content.size(); ++j) {
      const ojson& b = content[j];
      const std::string wb = indexed(w + ".content", j);
      const std::string& t = block_type(b, wb);
      if (t == "text") {
        text += string_field(b, "text", wb);
      } else if (t == "thinking") {
        if (has_reasoning) reasoning += "\n\n";
        reasoning += string_field(b, "thinking", wb);
        has_reasoning = true;
      } else if (t == "redacted_thinking") {
        // opaque to us: nothing to render
      } else if (t == "tool_use") {
        const ojson input = b.contains("input") ? b["input"] : ojson::object();
        if (!input.is_object()) throw ApiError(400, wb + ".input must be an object", wb + ".input");
        calls.push_back(
            {{"id", string_field(b, "id", wb)},
             {"type", "function"},
             {"function",
              {{"name", string_field(b, "name", wb)}, {"arguments", json_text(input)}}}});
      } else {
        throw ApiError(400, wb + ".type \"" + t + "\" is not supported in an assistant message",
                       wb + ".type");
      }
    }
  }
  a["content"] = text;
  if (has_reasoning) a["reasoning_content"] = reasoning;
  if (!calls.empty()) a["tool_calls"] = std::move(calls);
  if (last && calls.empty()) a["prefix"] = true;
  return a;
}

}  // namespace

ojson anthropic_to_chat(const ojson& body, const Warn& warn) {
  if (!body.is_object()) throw ApiError(400, "request body must be a JSON object");
  ojson chat = ojson::object();
  chat["model"] = body.contains("model") ? body["model"] : ojson();
  const auto mt = body.find("max_tokens");
  if (mt == body.end() || mt->is_null())
    throw ApiError(400, "max_tokens: Field required", "max_tokens");
  chat["max_tokens"] = *mt;
  for (const char* k : {"temperature", "top_p", "top_k", "stream", kTestOutputField})
    if (body.contains(k)) chat[k] = body[k];
  if (body.contains("stop_sequences")) chat["stop"] = body["stop_sequences"];
  convert_output_settings(body, &chat, warn);

  ojson msgs = ojson::array();
  if (const auto it = body.find("system"); it != body.end() && !it->is_null())
    msgs.push_back({{"role", "system"}, {"content", joined_text(*it, "system")}});

  const auto mit = body.find("messages");
  if (mit == body.end() || !mit->is_array() || mit->empty())
    throw ApiError(400, "messages: Field required (a non-empty array)", "messages");
  const ojson& in = *mit;
  for (size_t i = 0; i < in.size(); ++i) {
    const ojson& m = in[i];
    const std::string w = indexed("messages", i);
    if (!m.is_object()) throw ApiError(400, w + " must be an object", w);
    const std::string role =
        m.contains("role") && m["role"].is_string() ? m["role"].get<std::string>() : std::string();
    if (role != "user" && role != "assistant" && role != "system")
      throw ApiError(400, w + ".role must be \"user\", \"assistant\" or \"system\"", w + ".role");
    const auto cit = m.find("content");
    if (cit == m.end() || !(cit->is_string() || cit->is_array()))
      throw ApiError(400, w + ".content must be a string or an array of content blocks",
                     w + ".content");
    if (role == "system")  // rendered where it stands, as a system turn of the conversation
      msgs.push_back({{"role", "system"}, {"content", joined_text(*cit, w + ".content")}});
    else if (role == "user")
      convert_user(*cit, w, &msgs, warn);
    else
      msgs.push_back(convert_assistant(*cit, w, i + 1 == in.size()));
  }
  chat["messages"] = std::move(msgs);
  if (const auto it = body.find("tools"); it != body.end() && !it->is_null()) {
    ojson tools = convert_tools(*it, warn);
    if (!tools.empty()) chat["tools"] = std::move(tools);
  }
  if (const auto it = body.find("tool_choice"); it != body.end() && !it->is_null()) {
    ojson tc = convert_tool_choice(*it, warn);
    // tool_choice without tools: "none"/"auto" are harmless; forced ones fail in the text layer.
    if (chat.contains("tools") || !tc.is_string()) chat["tool_choice"] = std::move(tc);
  }
  return chat;
}

const char* anthropic_stop_reason(const Outcome& o) {
  switch (o.finish) {
    case Finish::kLength:
      return "max_tokens";
    case Finish::kToolCalls:
      return "tool_use";
    default:
      return o.stop_sequence.empty() ? "end_turn" : "stop_sequence";
  }
}

ojson anthropic_usage(const Usage& u) {
  ojson j = ojson::object();
  j["input_tokens"] = u.prompt_tokens - u.cached_tokens;
  j["cache_creation_input_tokens"] = 0;
  j["cache_read_input_tokens"] = u.cached_tokens;
  j["output_tokens"] = u.completion_tokens;
  return j;
}

AnthropicFormat::AnthropicFormat(std::string id, std::string model)
    : id_(std::move(id)), model_(std::move(model)) {}

void AnthropicFormat::open_block(Block b, ojson content_block, std::string* out) {
  close_block(out);
  block_ = b;
  ++index_;
  *out += sse_event("content_block_start", {{"type", "content_block_start"},
                                            {"index", index_},
                                            {"content_block", std::move(content_block)}});
  if (!pinged_) {
    pinged_ = true;
    *out += sse_event("ping", {{"type", "ping"}});
  }
}

void AnthropicFormat::close_block(std::string* out) {
  if (block_ == Block::kNone) return;
  if (block_ == Block::kThinking)
    *out += sse_event("content_block_delta",
                      {{"type", "content_block_delta"},
                       {"index", index_},
                       {"delta", {{"type", "signature_delta"}, {"signature", kSignature}}}});
  *out += sse_event("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
  block_ = Block::kNone;
}

void AnthropicFormat::event(const CompletionEvent& e, const Outcome* outcome, std::string* out) {
  using K = CompletionEvent::Kind;
  if (e.kind == K::kDone && outcome && outcome->finish == Finish::kError) {
    *out += sse_event("error", anthropic_error_body(ApiError(500, outcome->error)));
    return;
  }
  if (!started_) {
    started_ = true;
    const Usage& u = e.kind == K::kDone && outcome ? outcome->usage : e.usage;
    ojson usage = anthropic_usage(u);
    usage["output_tokens"] = 0;
    ojson msg = {{"id", id_},
                 {"type", "message"},
                 {"role", "assistant"},
                 {"model", model_},
                 {"content", ojson::array()},
                 {"stop_reason", nullptr},
                 {"stop_sequence", nullptr},
                 {"usage", usage}};
    *out += sse_event("message_start", {{"type", "message_start"}, {"message", msg}});
  }
  switch (e.kind) {
    case K::kStarted:
      break;
    case K::kReasoning:
      if (block_ != Block::kThinking)
        open_block(Block::kThinking, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}},
                   out);
      *out += sse_event("content_block_delta",
                        {{"type", "content_block_delta"},
                         {"index", index_},
                         {"delta", {{"type", "thinking_delta"}, {"thinking", e.text}}}});
      break;
    case K::kContent:
      if (block_ != Block::kText) open_block(Block::kText, {{"type", "text"}, {"text", ""}}, out);
      *out +=
          sse_event("content_block_delta", {{"type", "content_block_delta"},
                                            {"index", index_},
                                            {"delta", {{"type", "text_delta"}, {"text", e.text}}}});
      break;
    case K::kToolBegin:
      open_block(Block::kToolUse,
                 {{"type", "tool_use"}, {"id", e.id}, {"name", e.name}, {"input", ojson::object()}},
                 out);
      break;
    case K::kToolArgs:
      if (block_ == Block::kToolUse)
        *out += sse_event("content_block_delta",
                          {{"type", "content_block_delta"},
                           {"index", index_},
                           {"delta", {{"type", "input_json_delta"}, {"partial_json", e.text}}}});
      break;
    case K::kToolEnd:
      close_block(out);
      break;
    case K::kLogprob:  // not part of the Messages API
      break;
    case K::kDone: {
      close_block(out);
      if (!outcome) break;
      ojson delta = {{"stop_reason", anthropic_stop_reason(*outcome)},
                     {"stop_sequence",
                      outcome->stop_sequence.empty() ? ojson() : ojson(outcome->stop_sequence)}};
      *out += sse_event("message_delta", {{"type", "message_delta"},
                                          {"delta", std::move(delta)},
                                          {"usage", anthropic_usage(outcome->usage)}});
      *out += sse_event("message_stop", {{"type", "message_stop"}});
      break;
    }
  }
}

ojson AnthropicFormat::body(const Outcome& o) const {
  ojson content = ojson::array();
  if (o.thinking && !o.reasoning.empty())
    content.push_back({{"type", "thinking"}, {"thinking", o.reasoning}, {"signature", kSignature}});
  if (!o.content.empty() || o.tool_calls.empty())
    content.push_back({{"type", "text"}, {"text", o.content}});
  for (const auto& c : o.tool_calls) {
    ojson input = parse_untrusted_json(c.arguments);
    if (!input.is_object()) input = ojson::object();
    content.push_back({{"type", "tool_use"}, {"id", c.id}, {"name", c.name}, {"input", input}});
  }
  ojson b = ojson::object();
  b["id"] = id_;
  b["type"] = "message";
  b["role"] = "assistant";
  b["model"] = model_;
  b["content"] = std::move(content);
  b["stop_reason"] = anthropic_stop_reason(o);
  b["stop_sequence"] = o.stop_sequence.empty() ? ojson() : ojson(o.stop_sequence);
  b["usage"] = anthropic_usage(o.usage);
  return b;
}

}  // namespace cedar::server
