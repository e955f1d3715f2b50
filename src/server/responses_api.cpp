#include "server/responses_api.h"

#include "base/json_limits.h"
#include "server/sse.h"

namespace cedar::server {

ojson responses_usage(const Usage& u) {
  return {{"input_tokens", u.prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", u.cached_tokens}}},
          {"output_tokens", u.completion_tokens},
          {"output_tokens_details", {{"reasoning_tokens", u.reasoning_tokens}}},
          {"total_tokens", u.prompt_tokens + u.completion_tokens}};
}

ResponsesFormat::ResponsesFormat(std::string id, std::string model, int64_t created,
                                 const ojson& request, const ResponsesRequest& req)
    : id_(std::move(id)),
      model_(std::move(model)),
      created_(created),
      tools_(req.tools),
      summary_(req.summary),
      encrypted_(req.encrypted_reasoning) {
  echo_ = ojson::object();
  echo_["instructions"] = request.value("instructions", ojson());
  echo_["max_output_tokens"] = request.value("max_output_tokens", ojson());
  echo_["parallel_tool_calls"] = request.value("parallel_tool_calls", ojson(true));
  echo_["previous_response_id"] = nullptr;
  const ojson reasoning = request.contains("reasoning") && request["reasoning"].is_object()
                              ? request["reasoning"]
                              : ojson::object();
  echo_["reasoning"] = {{"effort", reasoning.value("effort", ojson())},
                        {"summary", reasoning.value("summary", ojson())}};
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

const ResponsesTool* ResponsesFormat::tool(const std::string& shown) const {
  const auto it = tools_.find(shown);
  return it == tools_.end() ? nullptr : &it->second;
}

// A reasoning item: its text as content, as a summary when one was asked for (the reasoning is
// its own summary), and carried in encrypted_content when the client asked for that.
ojson ResponsesFormat::reasoning_item(const std::string& text, const char* status) const {
  ojson item = {{"id", "rs_" + id_.substr(5)},
                {"type", "reasoning"},
                {"summary", ojson::array()},
                {"content", ojson::array({{{"type", "reasoning_text"}, {"text", text}}})},
                {"status", status}};
  if (summary_) item["summary"].push_back({{"type", "summary_text"}, {"text", text}});
  if (encrypted_) item["encrypted_content"] = std::string(kReasoningCarrier) + text;
  return item;
}

namespace {

// The arguments object of a call, or an empty object when they are not one (a call cut short).
ojson arguments_object(const std::string& json) {
  ojson v = parse_untrusted_json(json);
  return v.is_object() ? v : ojson::object();
}

}  // namespace

ojson ResponsesFormat::call_item(const std::string& item_id, const ToolCallOut& c) const {
  const ResponsesTool* t = tool(c.name);
  ojson item = {{"id", item_id}, {"status", c.cut ? "incomplete" : "completed"}, {"call_id", c.id}};
  if (t && t->kind == ResponsesTool::Kind::kLocalShell) {
    ojson action = {{"type", "exec"}};
    const ojson args = arguments_object(c.arguments);
    for (const auto& [k, v] : args.items()) action[k] = v;
    if (!action.contains("command")) action["command"] = ojson::array();
    item["type"] = "local_shell_call";
    item["action"] = std::move(action);
    return item;
  }
  item["name"] = t ? t->name : c.name;
  if (t && !t->ns.empty()) item["namespace"] = t->ns;
  if (t && t->kind == ResponsesTool::Kind::kCustom) {
    const ojson args = arguments_object(c.arguments);
    const auto in = args.find("input");
    item["type"] = "custom_tool_call";
    item["input"] = in != args.end() && in->is_string() ? in->get<std::string>() : std::string();
  } else {
    item["type"] = "function_call";
    item["arguments"] = c.arguments;
  }
  return item;
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
  if (kind == Item::kLocalShell) return;  // announced whole when its action is known
  emit("response.output_item.added", {{"output_index", oi}, {"item", item}}, out);
  if (kind == Item::kReasoning) {
    emit("response.content_part.added",
         {{"item_id", item["id"]},
          {"output_index", oi},
          {"content_index", 0},
          {"part", {{"type", "reasoning_text"}, {"text", ""}}}},
         out);
    current_["content"] = ojson::array({{{"type", "reasoning_text"}, {"text", ""}}});
    if (summary_)
      emit("response.reasoning_summary_part.added",
           {{"item_id", item["id"]},
            {"output_index", oi},
            {"summary_index", 0},
            {"part", {{"type", "summary_text"}, {"text", ""}}}},
           out);
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

// The .done events of a tool call's item; custom and local_shell calls are sent here whole.
void ResponsesFormat::close_call(int64_t oi, std::string* out) {
  const ojson id = current_["id"];
  if (item_ == Item::kFunctionCall) {
    ojson done = {{"item_id", id},
                  {"output_index", oi},
                  {"name", current_["name"]},
                  {"arguments", current_["arguments"]}};
    emit("response.function_call_arguments.done", std::move(done), out);
    return;
  }
  current_ = call_item(id.get<std::string>(), call_);
  if (item_ == Item::kLocalShell) {
    ojson added = current_;
    added["status"] = "in_progress";
    emit("response.output_item.added", {{"output_index", oi}, {"item", added}}, out);
    return;
  }
  const ojson input = current_["input"];
  emit("response.custom_tool_call_input.delta",
       {{"item_id", id}, {"output_index", oi}, {"delta", input}}, out);
  emit("response.custom_tool_call_input.done",
       {{"item_id", id}, {"output_index", oi}, {"input", input}}, out);
}

void ResponsesFormat::close_item(std::string* out, const char* status) {
  if (item_ == Item::kNone) return;
  const int64_t oi = int64_t(output_.size());
  const ojson id = current_["id"];
  if (item_ == Item::kReasoning || item_ == Item::kMessage) {
    const ojson part = current_["content"][0];
    const std::string text = part["text"].get<std::string>();
    const bool reasoning = item_ == Item::kReasoning;
    emit(reasoning ? "response.reasoning_text.done" : "response.output_text.done",
         {{"item_id", id}, {"output_index", oi}, {"content_index", 0}, {"text", text}}, out);
    emit("response.content_part.done",
         {{"item_id", id}, {"output_index", oi}, {"content_index", 0}, {"part", part}}, out);
    if (reasoning && summary_) {
      emit("response.reasoning_summary_text.done",
           {{"item_id", id}, {"output_index", oi}, {"summary_index", 0}, {"text", text}}, out);
      emit("response.reasoning_summary_part.done",
           {{"item_id", id},
            {"output_index", oi},
            {"summary_index", 0},
            {"part", {{"type", "summary_text"}, {"text", text}}}},
           out);
    }
    if (reasoning) current_ = reasoning_item(text, "in_progress");
  } else {
    close_call(oi, out);
  }
  current_["status"] = status;
  emit("response.output_item.done", {{"output_index", oi}, {"item", current_}}, out);
  output_.push_back(std::move(current_));
  current_ = ojson();
  item_ = Item::kNone;
}

void ResponsesFormat::reasoning_delta(const std::string& text, std::string* out) {
  if (item_ != Item::kReasoning)
    open_item(Item::kReasoning,
              {{"id", "rs_" + id_.substr(5)},
               {"type", "reasoning"},
               {"summary", ojson::array()},
               {"content", ojson::array()},
               {"status", "in_progress"}},
              out);
  current_["content"][0]["text"] = current_["content"][0]["text"].get<std::string>() + text;
  const ojson id = current_["id"];
  const int64_t at = int64_t(output_.size());
  emit("response.reasoning_text.delta",
       {{"item_id", id}, {"output_index", at}, {"content_index", 0}, {"delta", text}}, out);
  if (summary_)
    emit("response.reasoning_summary_text.delta",
         {{"item_id", id}, {"output_index", at}, {"summary_index", 0}, {"delta", text}}, out);
}

// A tool call begins: its item is opened as the kind of tool the client declared.
void ResponsesFormat::begin_call(const CompletionEvent& e, std::string* out) {
  const std::string item_id = "fc_" + id_.substr(5) + "_" + std::to_string(e.index);
  call_ = ToolCallOut{e.id, e.name, ""};
  const ResponsesTool* t = tool(e.name);
  const Item kind = !t                                            ? Item::kFunctionCall
                    : t->kind == ResponsesTool::Kind::kCustom     ? Item::kCustomCall
                    : t->kind == ResponsesTool::Kind::kLocalShell ? Item::kLocalShell
                                                                  : Item::kFunctionCall;
  ojson item = call_item(item_id, call_);
  item["status"] = "in_progress";
  if (kind == Item::kFunctionCall) item["arguments"] = "";
  open_item(kind, std::move(item), out);
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
      break;
    case K::kToolEnd:
      call_.cut = e.cut;
      close_item(out, e.cut ? "incomplete" : "completed");
      break;
    case K::kReasoning:
      reasoning_delta(e.text, out);
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
      begin_call(e, out);
      break;
    case K::kToolArgs:
      call_.arguments += e.text;
      if (item_ == Item::kFunctionCall) {
        current_["arguments"] = current_["arguments"].get<std::string>() + e.text;
        emit("response.function_call_arguments.delta",
             {{"item_id", current_["id"]}, {"output_index", oi}, {"delta", e.text}}, out);
      }
      break;
    case K::kDone: {
      // The item still open when the limit struck is the one it cut short.
      const bool incomplete = outcome && outcome->finish == Finish::kLength;
      close_item(out, incomplete ? "incomplete" : "completed");
      if (!outcome) break;
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
    output.push_back(reasoning_item(o.reasoning, "completed"));
  if (!o.content.empty() || o.tool_calls.empty())
    output.push_back({{"id", "msg_" + base},
                      {"type", "message"},
                      {"status", "completed"},
                      {"role", "assistant"},
                      {"content", ojson::array({{{"type", "output_text"},
                                                 {"text", o.content},
                                                 {"annotations", ojson::array()},
                                                 {"logprobs", ojson::array()}}})}});
  for (size_t i = 0; i < o.tool_calls.size(); ++i)
    output.push_back(call_item("fc_" + base + "_" + std::to_string(i), o.tool_calls[i]));
  // Text the limit cut short is incomplete (a cut call says so itself, in call_item).
  if (o.finish == Finish::kLength && o.tool_calls.empty()) output.back()["status"] = "incomplete";
  return response(o.finish == Finish::kLength ? "incomplete" : "completed", std::move(output), &o);
}

}  // namespace cedar::server
