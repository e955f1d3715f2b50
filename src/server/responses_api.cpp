#include "server/responses_api.h"

#include "server/sse.h"

namespace cedar::server {

namespace {

std::string idx(const std::string& base, size_t i) { return base + "[" + std::to_string(i) + "]"; }

// Message content (string or parts) -> Chat content (string or parts).
ojson convert_content(const ojson& c, const std::string& where, bool assistant) {
  if (c.is_string()) return c;
  if (!c.is_array())
    throw ApiError(400, where + " must be a string or an array of content parts", where);
  ojson parts = ojson::array();
  std::string text;
  for (size_t i = 0; i < c.size(); ++i) {
    const ojson& p = c[i];
    const std::string w = idx(where, i);
    if (!p.is_object() || !p.contains("type") || !p["type"].is_string())
      throw ApiError(400, w + " must be an object with a string \"type\"", w);
    const std::string t = p["type"].get<std::string>();
    if (t == "input_text" || t == "output_text" || t == "text" || t == "refusal") {
      const char* key = t == "refusal" ? "refusal" : "text";
      if (!p.contains(key) || !p[key].is_string())
        throw ApiError(400, w + "." + key + " must be a string", w + "." + key);
      if (assistant)
        text += p[key].get<std::string>();
      else
        parts.push_back({{"type", "text"}, {"text", p[key]}});
    } else if (t == "input_image" && !assistant) {
      if (!p.contains("image_url") || !p["image_url"].is_string())
        throw ApiError(400, w + ".image_url must be a string (file_id is not supported)",
                       w + ".image_url");
      parts.push_back({{"type", "image_url"}, {"image_url", {{"url", p["image_url"]}}}});
    } else {
      throw ApiError(400, w + ".type \"" + t + "\" is not supported", w + ".type");
    }
  }
  if (assistant) return text;
  return parts;
}

std::string reasoning_text(const ojson& item) {
  std::string s;
  for (const char* key : {"content", "summary"}) {
    if (!item.contains(key) || !item[key].is_array()) continue;
    for (const auto& p : item[key])
      if (p.is_object() && p.contains("text") && p["text"].is_string()) {
        if (!s.empty()) s += "\n\n";
        s += p["text"].get<std::string>();
      }
    if (!s.empty()) break;  // prefer the full reasoning text over the summary
  }
  return s;
}

}  // namespace

ojson responses_to_chat(const ojson& body) {
  if (!body.is_object()) throw ApiError(400, "request body must be a JSON object");
  if (body.contains("previous_response_id") && !body["previous_response_id"].is_null())
    throw ApiError(400,
                   "previous_response_id is not supported: this server stores no responses; send "
                   "the whole conversation in input",
                   "previous_response_id");
  ojson chat = ojson::object();
  chat["model"] = body.contains("model") ? body["model"] : ojson();
  for (const char* k : {"temperature", "top_p", "stream", kTestOutputField})
    if (body.contains(k)) chat[k] = body[k];
  if (body.contains("max_output_tokens")) chat["max_tokens"] = body["max_output_tokens"];
  if (const auto it = body.find("reasoning"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) throw ApiError(400, "reasoning must be an object", "reasoning");
    if (const auto e = it->find("effort"); e != it->end() && !e->is_null())
      chat["reasoning_effort"] = *e;  // "none" turns thinking off
  }
  if (const auto it = body.find("text"); it != body.end() && it->is_object()) {
    if (const auto f = it->find("format"); f != it->end() && f->is_object()) {
      const std::string t = f->value("type", "");
      if (t == "json_object") {
        chat["response_format"] = {{"type", "json_object"}};
      } else if (t == "json_schema") {
        ojson js = *f;
        js.erase("type");
        chat["response_format"] = {{"type", "json_schema"}, {"json_schema", js}};
      } else if (t != "text") {
        throw ApiError(400, "text.format.type must be \"text\", \"json_object\" or \"json_schema\"",
                       "text.format.type");
      }
    }
  }

  ojson msgs = ojson::array();
  if (const auto it = body.find("instructions"); it != body.end() && !it->is_null()) {
    if (!it->is_string()) throw ApiError(400, "instructions must be a string", "instructions");
    msgs.push_back({{"role", "system"}, {"content", *it}});
  }
  const auto iit = body.find("input");
  if (iit == body.end() || iit->is_null())
    throw ApiError(400, "input is required: a string or an array of items", "input");
  if (iit->is_string()) {
    msgs.push_back({{"role", "user"}, {"content", *iit}});
  } else if (iit->is_array()) {
    std::string pending_reasoning;
    bool have_reasoning = false;
    bool assistant_open = false;  // the last message is an assistant turn calls can join
    for (size_t i = 0; i < iit->size(); ++i) {
      const ojson& item = (*iit)[i];
      const std::string w = idx("input", i);
      if (!item.is_object()) throw ApiError(400, w + " must be an object", w);
      const std::string type = item.contains("type") && item["type"].is_string()
                                   ? item["type"].get<std::string>()
                                   : (item.contains("role") ? "message" : "");
      if (type == "message") {
        std::string role = item.contains("role") && item["role"].is_string()
                               ? item["role"].get<std::string>()
                               : "";
        if (role == "developer") role = "system";
        if (role != "user" && role != "assistant" && role != "system")
          throw ApiError(400, w + ".role must be user, assistant, system or developer",
                         w + ".role");
        if (!item.contains("content"))
          throw ApiError(400, w + ".content is required", w + ".content");
        ojson m = {{"role", role},
                   {"content", convert_content(item["content"], w + ".content", role != "user")}};
        if (role == "assistant" && have_reasoning) {
          m["reasoning_content"] = pending_reasoning;
          have_reasoning = false;
          pending_reasoning.clear();
        }
        msgs.push_back(std::move(m));
        assistant_open = role == "assistant";
      } else if (type == "reasoning") {
        if (have_reasoning) pending_reasoning += "\n\n";
        pending_reasoning += reasoning_text(item);
        have_reasoning = true;
      } else if (type == "function_call") {
        for (const char* k : {"call_id", "name", "arguments"})
          if (!item.contains(k) || !item[k].is_string())
            throw ApiError(400, w + "." + k + " must be a string", w + "." + k);
        ojson call = {{"id", item["call_id"]},
                      {"type", "function"},
                      {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}};
        if (!assistant_open) {
          ojson m = {{"role", "assistant"}, {"content", ""}, {"tool_calls", ojson::array()}};
          msgs.push_back(std::move(m));
          assistant_open = true;
        }
        ojson& a = msgs.back();
        if (have_reasoning) {
          a["reasoning_content"] = pending_reasoning;
          have_reasoning = false;
          pending_reasoning.clear();
        }
        if (!a.contains("tool_calls")) a["tool_calls"] = ojson::array();
        a["tool_calls"].push_back(std::move(call));
      } else if (type == "function_call_output") {
        if (!item.contains("call_id") || !item["call_id"].is_string())
          throw ApiError(400, w + ".call_id must be a string", w + ".call_id");
        ojson out = item.contains("output") ? item["output"] : ojson("");
        if (out.is_array()) out = convert_content(out, w + ".output", false);
        if (!out.is_string() && !out.is_array())
          throw ApiError(400, w + ".output must be a string or an array of content parts",
                         w + ".output");
        msgs.push_back({{"role", "tool"}, {"tool_call_id", item["call_id"]}, {"content", out}});
        assistant_open = false;
      } else {
        throw ApiError(400, w + ".type \"" + type + "\" is not supported", w + ".type");
      }
    }
  } else {
    throw ApiError(400, "input must be a string or an array of items", "input");
  }
  chat["messages"] = std::move(msgs);

  if (const auto it = body.find("tools"); it != body.end() && !it->is_null()) {
    if (!it->is_array()) throw ApiError(400, "tools must be an array", "tools");
    ojson tools = ojson::array();
    for (size_t i = 0; i < it->size(); ++i) {
      const ojson& t = (*it)[i];
      const std::string w = idx("tools", i);
      const std::string type = t.is_object() ? t.value("type", "") : "";
      if (type.rfind("web_search", 0) == 0) continue;  // not available locally: ignored
      if (type != "function")
        throw ApiError(400, w + ".type \"" + type + "\" is not supported (only function tools)",
                       w + ".type");
      ojson f = ojson::object();
      for (const char* k : {"name", "description", "parameters", "strict"})
        if (t.contains(k) && !t[k].is_null()) f[k] = t[k];
      tools.push_back({{"type", "function"}, {"function", std::move(f)}});
    }
    if (!tools.empty()) chat["tools"] = std::move(tools);
  }
  if (const auto it = body.find("tool_choice"); it != body.end() && !it->is_null()) {
    if (it->is_string()) {
      if (chat.contains("tools") || *it != "auto") chat["tool_choice"] = *it;
    } else if (it->is_object() && it->value("type", "") == "function" && it->contains("name")) {
      chat["tool_choice"] = {{"type", "function"}, {"function", {{"name", (*it)["name"]}}}};
    } else {
      throw ApiError(400,
                     "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": "
                     "\"function\", \"name\": ...}",
                     "tool_choice");
    }
  }
  return chat;
}

ojson responses_usage(const Usage& u) {
  return {{"input_tokens", u.prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", u.cached_tokens}}},
          {"output_tokens", u.completion_tokens},
          {"output_tokens_details", {{"reasoning_tokens", u.reasoning_tokens}}},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

ResponsesFormat::ResponsesFormat(std::string id, std::string model, int64_t created,
                                 const ojson& request)
    : id_(std::move(id)), model_(std::move(model)), created_(created) {
  echo_ = ojson::object();
  echo_["instructions"] = request.value("instructions", ojson());
  echo_["max_output_tokens"] = request.value("max_output_tokens", ojson());
  echo_["parallel_tool_calls"] = request.value("parallel_tool_calls", ojson(true));
  echo_["previous_response_id"] = nullptr;
  echo_["reasoning"] = {{"effort", request.contains("reasoning") && request["reasoning"].is_object()
                                       ? request["reasoning"].value("effort", ojson())
                                       : ojson()},
                        {"summary", nullptr}};
  echo_["store"] = false;
  echo_["temperature"] = request.value("temperature", ojson(1.0));
  echo_["text"] = request.contains("text") && request["text"].is_object()
                      ? request["text"]
                      : ojson{{"format", {{"type", "text"}}}};
  echo_["tool_choice"] = request.value("tool_choice", ojson("auto"));
  echo_["tools"] =
      request.contains("tools") && request["tools"].is_array() ? request["tools"] : ojson::array();
  echo_["top_p"] = request.value("top_p", ojson(1.0));
  echo_["truncation"] = "disabled";
  echo_["metadata"] = request.contains("metadata") && request["metadata"].is_object()
                          ? request["metadata"]
                          : ojson::object();
}

ojson ResponsesFormat::response(const char* status, ojson output, const Outcome* o) const {
  ojson r = ojson::object();
  r["id"] = id_;
  r["object"] = "response";
  r["created_at"] = created_;
  r["status"] = status;
  r["error"] = nullptr;
  r["incomplete_details"] =
      (o && o->finish == Finish::kLength) ? ojson{{"reason", "max_output_tokens"}} : ojson();
  r["model"] = model_;
  r["output"] = std::move(output);
  for (const auto& [k, v] : echo_.items()) r[k] = v;
  r["usage"] = o ? responses_usage(o->usage) : ojson();
  return r;
}

void ResponsesFormat::emit(const char* type, ojson payload, std::string* out) {
  ojson e = ojson::object();
  e["type"] = type;
  for (auto& [k, v] : payload.items()) e[k] = std::move(v);
  e["sequence_number"] = seq_++;
  *out += sse_event(type, e);
}

void ResponsesFormat::open_item(Item kind, ojson item, std::string* out) {
  close_item(out);
  item_ = kind;
  current_ = item;
  const int64_t oi = int64_t(output_.size());
  emit("response.output_item.added", {{"output_index", oi}, {"item", item}}, out);
  if (kind == Item::kReasoning) {
    emit("response.content_part.added",
         {{"item_id", item["id"]},
          {"output_index", oi},
          {"content_index", 0},
          {"part", {{"type", "reasoning_text"}, {"text", ""}}}},
         out);
    current_["content"] = ojson::array({{{"type", "reasoning_text"}, {"text", ""}}});
  } else if (kind == Item::kMessage) {
    ojson part = {{"type", "output_text"},
                  {"text", ""},
                  {"annotations", ojson::array()},
                  {"logprobs", ojson::array()}};
    emit("response.content_part.added",
         {{"item_id", item["id"]}, {"output_index", oi}, {"content_index", 0}, {"part", part}},
         out);
    current_["content"] = ojson::array({part});
  }
}

void ResponsesFormat::close_item(std::string* out) {
  if (item_ == Item::kNone) return;
  const int64_t oi = int64_t(output_.size());
  const ojson id = current_["id"];
  current_["status"] = "completed";
  if (item_ == Item::kReasoning || item_ == Item::kMessage) {
    const ojson part = current_["content"][0];
    const std::string text = part["text"].get<std::string>();
    emit(item_ == Item::kReasoning ? "response.reasoning_text.done" : "response.output_text.done",
         {{"item_id", id}, {"output_index", oi}, {"content_index", 0}, {"text", text}}, out);
    emit("response.content_part.done",
         {{"item_id", id}, {"output_index", oi}, {"content_index", 0}, {"part", part}}, out);
  } else {
    emit("response.function_call_arguments.done",
         {{"item_id", id},
          {"output_index", oi},
          {"name", current_["name"]},
          {"arguments", current_["arguments"]}},
         out);
  }
  emit("response.output_item.done", {{"output_index", oi}, {"item", current_}}, out);
  output_.push_back(std::move(current_));
  current_ = ojson();
  item_ = Item::kNone;
}

void ResponsesFormat::event(const CompletionEvent& e, const Outcome* outcome, std::string* out) {
  using K = CompletionEvent::Kind;
  if (e.kind == K::kDone && outcome && outcome->finish == Finish::kError) {
    ojson err = openai_error_body(ApiError(500, outcome->error));
    emit("error",
         {{"code", "internal_error"},
          {"message", outcome->error},
          {"param", nullptr},
          {"error", err["error"]}},
         out);
    return;
  }
  if (!started_) {
    started_ = true;
    ojson r = response("in_progress", ojson::array(), nullptr);
    emit("response.created", {{"response", r}}, out);
    emit("response.in_progress", {{"response", r}}, out);
  }
  const int64_t oi = int64_t(output_.size());
  switch (e.kind) {
    case K::kStarted:
    case K::kLogprob:  // not reported by this format
    case K::kToolEnd:
      if (e.kind == K::kToolEnd) close_item(out);
      break;
    case K::kReasoning:
      if (item_ != Item::kReasoning)
        open_item(Item::kReasoning,
                  {{"id", "rs_" + id_.substr(5)},
                   {"type", "reasoning"},
                   {"summary", ojson::array()},
                   {"content", ojson::array()},
                   {"status", "in_progress"}},
                  out);
      current_["content"][0]["text"] = current_["content"][0]["text"].get<std::string>() + e.text;
      emit("response.reasoning_text.delta",
           {{"item_id", current_["id"]},
            {"output_index", int64_t(output_.size())},
            {"content_index", 0},
            {"delta", e.text}},
           out);
      break;
    case K::kContent:
      if (item_ != Item::kMessage)
        open_item(Item::kMessage,
                  {{"id", "msg_" + id_.substr(5)},
                   {"type", "message"},
                   {"status", "in_progress"},
                   {"role", "assistant"},
                   {"content", ojson::array()}},
                  out);
      current_["content"][0]["text"] = current_["content"][0]["text"].get<std::string>() + e.text;
      emit("response.output_text.delta",
           {{"item_id", current_["id"]},
            {"output_index", int64_t(output_.size())},
            {"content_index", 0},
            {"delta", e.text},
            {"logprobs", ojson::array()}},
           out);
      break;
    case K::kToolBegin:
      open_item(Item::kFunctionCall,
                {{"id", "fc_" + id_.substr(5) + "_" + std::to_string(e.index)},
                 {"type", "function_call"},
                 {"status", "in_progress"},
                 {"call_id", e.id},
                 {"name", e.name},
                 {"arguments", ""}},
                out);
      break;
    case K::kToolArgs:
      if (item_ == Item::kFunctionCall) {
        current_["arguments"] = current_["arguments"].get<std::string>() + e.text;
        emit("response.function_call_arguments.delta",
             {{"item_id", current_["id"]}, {"output_index", oi}, {"delta", e.text}}, out);
      }
      break;
    case K::kDone: {
      close_item(out);
      if (!outcome) break;
      const bool incomplete = outcome->finish == Finish::kLength;
      ojson r = response(incomplete ? "incomplete" : "completed", output_, outcome);
      emit(incomplete ? "response.incomplete" : "response.completed", {{"response", r}}, out);
      break;
    }
  }
}

ojson ResponsesFormat::body(const Outcome& o) const {
  ojson output = ojson::array();
  const std::string base = id_.substr(5);
  if (o.thinking && !o.reasoning.empty())
    output.push_back(
        {{"id", "rs_" + base},
         {"type", "reasoning"},
         {"summary", ojson::array()},
         {"content", ojson::array({{{"type", "reasoning_text"}, {"text", o.reasoning}}})},
         {"status", "completed"}});
  if (!o.content.empty() || o.tool_calls.empty())
    output.push_back({{"id", "msg_" + base},
                      {"type", "message"},
                      {"status", "completed"},
                      {"role", "assistant"},
                      {"content", ojson::array({{{"type", "output_text"},
                                                 {"text", o.content},
                                                 {"annotations", ojson::array()},
                                                 {"logprobs", ojson::array()}}})}});
  for (size_t i = 0; i < o.tool_calls.size(); ++i) {
    const auto& c = o.tool_calls[i];
    output.push_back({{"id", "fc_" + base + "_" + std::to_string(i)},
                      {"type", "function_call"},
                      {"status", "completed"},
                      {"call_id", c.id},
                      {"name", c.name},
                      {"arguments", c.arguments}});
  }
  return response(o.finish == Finish::kLength ? "incomplete" : "completed", std::move(output), &o);
}

}  // namespace cedar::server
