#include "server/responses_request.h"

#include <set>
#include <vector>

#include "server/sse.h"
#include "text/json_grammar.h"

namespace cedar::server {

namespace {

std::string opt_str(const ojson& o, const char* key) {
  const auto it = o.find(key);
  return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// Message content (string or parts) -> Chat content (string or parts).
ojson convert_content(const ojson& c, const std::string& where, bool assistant) {
  if (c.is_string()) return c;
  if (!c.is_array())
    throw ApiError(400, where + " must be a string or an array of content parts", where);
  ojson parts = ojson::array();
  std::string text;
  for (size_t i = 0; i < c.size(); ++i) {
    const ojson& p = c[i];
    const std::string w = indexed(where, i);
    const std::string& t = block_type(p, w);
    if (t == "input_text" || t == "output_text" || t == "text" || t == "refusal") {
      const char* key = t == "refusal" ? "refusal" : "text";
      const std::string& s = string_field(p, key, w);
      if (assistant)
        text += s;
      else
        parts.push_back({{"type", "text"}, {"text", s}});
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

// A reasoning item's text: its full text, else the text this server carried in
// encrypted_content, else its summary.
std::string reasoning_text(const ojson& item) {
  auto texts = [&item](const char* key) {
    std::string s;
    if (!item.contains(key) || !item[key].is_array()) return s;
    for (const auto& p : item[key])
      if (p.is_object() && p.contains("text") && p["text"].is_string()) {
        if (!s.empty()) s += "\n\n";
        s += p["text"].get<std::string>();
      }
    return s;
  };
  if (std::string s = texts("content"); !s.empty()) return s;
  const std::string enc = opt_str(item, "encrypted_content");
  if (enc.rfind(kReasoningCarrier, 0) == 0) return enc.substr(kReasoningCarrier.size());
  return texts("summary");
}

// ---- tools ------------------------------------------------------------------------------------

// The parameters of the function a local_shell tool is offered as: the action of a
// local_shell_call item without its "type".
ojson local_shell_parameters() {
  return ojson::parse(R"({"type": "object", "properties": {
      "command": {"type": "array", "items": {"type": "string"},
                  "description": "The program and its arguments (argv)."},
      "working_directory": {"type": "string"},
      "timeout_ms": {"type": "integer"},
      "env": {"type": "object", "additionalProperties": {"type": "string"}}},
    "required": ["command"]})");
}

constexpr const char* kLocalShellName = "local_shell";

// A custom tool is offered as a function whose one string parameter "input" is its freeform
// input. A regex format is enforced while decoding (the tool becomes strict, its input a string
// of that whole pattern) where structured output can hold the pattern; a lark grammar is only
// shown to the model, and the log says so.
ojson custom_function(const ojson& t, const std::string& w, const Warn& warn) {
  ojson input = {{"type", "string"}, {"description", "The tool's input, as free text."}};
  bool strict = false;
  if (const auto f = t.find("format"); f != t.end() && f->is_object()) {
    const std::string type = f->value("type", "text");
    if (type == "grammar") {
      const std::string syntax = f->value("syntax", "");
      const std::string def = opt_str(*f, "definition");
      if (syntax != "lark" && syntax != "regex")
        throw ApiError(400, w + ".format.syntax must be \"lark\" or \"regex\"",
                       w + ".format.syntax");
      input["description"] =
          "The tool's input, as text that matches this " + syntax + " grammar:\n" + def;
      if (syntax == "regex") {
        ojson anchored = input;
        anchored["pattern"] = "^(?:" + def + ")$";
        try {
          (void)text::JsonSchema::compile_value(anchored, w + ".format.definition");
          input = std::move(anchored);
          strict = true;
        } catch (const text::RequestError& e) {
          warn_once(warn, "responses:custom_tool.regex:" + def.substr(0, 64),
                    "the regex format of custom tool " + opt_str(t, "name") +
                        " is not enforced while decoding: " + e.what());
        }
      } else {
        warn_once(warn, "responses:custom_tool.format.lark",
                  "the lark format of custom tools is shown to the model but not enforced while "
                  "decoding (no lark grammar engine here)");
      }
    } else if (type != "text") {
      throw ApiError(400, w + ".format.type must be \"text\" or \"grammar\"", w + ".format.type");
    }
  }
  ojson fn = {{"description", opt_str(t, "description")},
              {"parameters",
               {{"type", "object"},
                {"properties", {{"input", std::move(input)}}},
                {"required", ojson::array({"input"})}}}};
  if (strict) fn["strict"] = true;
  return fn;
}

// The request's tools as the functions the model is offered, each kept with its Responses kind
// and namespace. A function of a namespace is offered by its own name unless another tool has
// that name too; then as NAMESPACE__NAME.
class ToolTable {
 public:
  explicit ToolTable(const Warn& warn) : warn_(warn) {}

  void add_all(const ojson& tools) {
    if (!tools.is_array()) throw ApiError(400, "tools must be an array", "tools");
    for (size_t i = 0; i < tools.size(); ++i) add(tools[i], indexed("tools", i), "");
  }

  // The Chat tools, and the kinds by the name the model sees.
  void finish(ojson* chat_tools, std::map<std::string, ResponsesTool>* kinds) {
    std::map<std::string, int> count;
    for (const auto& e : entries_) ++count[e.tool.name];
    for (auto& e : entries_) {
      const std::string shown = model_name(e.tool.ns, e.tool.name, count);
      names_[{e.tool.ns, e.tool.name}] = shown;
      e.function["name"] = shown;
      chat_tools->push_back({{"type", "function"}, {"function", std::move(e.function)}});
      (*kinds)[shown] = e.tool;
    }
  }

  // The name the model sees for a call of the client's (namespace, name).
  std::string shown(const std::string& ns, const std::string& name) const {
    const auto it = names_.find({ns, name});
    if (it != names_.end()) return it->second;
    return ns.empty() ? name : ns + "__" + name;
  }

 private:
  struct Entry {
    ResponsesTool tool;
    ojson function;  // the Chat function object
  };

  static std::string model_name(const std::string& ns, const std::string& name,
                                const std::map<std::string, int>& count) {
    if (ns.empty() || count.at(name) == 1) return name;
    return ns + "__" + name;
  }

  void add(const ojson& t, const std::string& w, const std::string& ns) {
    const std::string type = t.is_object() ? t.value("type", "") : "";
    if (type.rfind("web_search", 0) == 0 && ns.empty()) {
      warn_once(warn_, "responses:tools.web_search",
                "the web_search tool is ignored: this server searches nothing");
      return;
    }
    Entry e;
    e.tool.ns = ns;
    if (type == "function") {
      e.tool.name = string_field(t, "name", w);
      e.function = ojson::object();
      for (const char* k : {"description", "parameters", "strict"})
        if (t.contains(k) && !t[k].is_null()) e.function[k] = t[k];
    } else if (type == "custom") {
      e.tool.kind = ResponsesTool::Kind::kCustom;
      e.tool.name = string_field(t, "name", w);
      e.function = custom_function(t, w, warn_);
    } else if (type == "local_shell" && ns.empty()) {
      e.tool.kind = ResponsesTool::Kind::kLocalShell;
      e.tool.name = kLocalShellName;
      e.function = {{"description", "Runs a command on the user's machine and returns its output."},
                    {"parameters", local_shell_parameters()}};
    } else if (type == "namespace" && ns.empty()) {
      const std::string& name = string_field(t, "name", w);
      const auto it = t.find("tools");
      if (it == t.end() || !it->is_array())
        throw ApiError(400, w + ".tools must be an array", w + ".tools");
      for (size_t i = 0; i < it->size(); ++i) add((*it)[i], indexed(w + ".tools", i), name);
      return;
    } else {
      throw ApiError(400,
                     w + ".type \"" + type +
                         "\" is not supported (function, custom, local_shell and namespace tools "
                         "are; web_search is ignored)",
                     w + ".type");
    }
    entries_.push_back(std::move(e));
  }

  const Warn& warn_;
  std::vector<Entry> entries_;
  std::map<std::pair<std::string, std::string>, std::string> names_;
};

// tool_choice -> the Chat tool_choice; allowed_tools also narrows the offered tools.
void convert_tool_choice(const ojson& tc, const ToolTable& table, ojson* chat) {
  const bool have_tools = chat->contains("tools");
  if (tc.is_string()) {
    if (have_tools || tc != "auto") (*chat)["tool_choice"] = tc;
    return;
  }
  const std::string type = tc.is_object() ? tc.value("type", "") : "";
  auto named = [&](const std::string& name) {
    (*chat)["tool_choice"] = {{"type", "function"}, {"function", {{"name", name}}}};
  };
  if ((type == "function" || type == "custom") && tc.contains("name") && tc["name"].is_string()) {
    named(table.shown(opt_str(tc, "namespace"), tc["name"].get<std::string>()));
  } else if (type == "local_shell") {
    named(kLocalShellName);
  } else if (type == "allowed_tools") {
    const std::string mode = tc.value("mode", "auto");
    if (mode != "auto" && mode != "required")
      throw ApiError(400, "tool_choice.mode must be \"auto\" or \"required\"", "tool_choice.mode");
    const auto list = tc.find("tools");
    if (list == tc.end() || !list->is_array())
      throw ApiError(400, "tool_choice.tools must be an array", "tool_choice.tools");
    std::set<std::string> allowed;
    for (const auto& t : *list) {
      if (!t.is_object()) continue;
      const std::string ttype = t.value("type", "");
      allowed.insert(ttype == "local_shell"
                         ? std::string(kLocalShellName)
                         : table.shown(opt_str(t, "namespace"), opt_str(t, "name")));
    }
    ojson kept = ojson::array();
    if (have_tools)
      for (auto& f : (*chat)["tools"])
        if (allowed.count(f["function"]["name"].get<std::string>())) kept.push_back(f);
    if (kept.empty()) {
      chat->erase("tools");
      if (mode == "required")
        throw ApiError(400, "tool_choice.tools names none of the offered tools", "tool_choice");
      return;
    }
    (*chat)["tools"] = std::move(kept);
    (*chat)["tool_choice"] = mode;
  } else {
    throw ApiError(400,
                   "tool_choice must be \"none\", \"auto\", \"required\", {\"type\": \"function\" "
                   "| \"custom\", \"name\": ...}, {\"type\": \"local_shell\"} or {\"type\": "
                   "\"allowed_tools\", ...}",
                   "tool_choice");
  }
}

// ---- input items ------------------------------------------------------------------------------

// The input list with item_reference items replaced by the item of the same request they name.
// This server stores nothing, so a reference to anything else is refused.
ojson resolve_references(const ojson& items) {
  std::map<std::string, const ojson*> by_id;
  for (const auto& it : items)
    if (it.is_object() && it.value("type", "") != "item_reference")
      if (const auto id = it.find("id"); id != it.end() && id->is_string())
        by_id.emplace(id->get<std::string>(), &it);
  ojson out = ojson::array();
  for (size_t i = 0; i < items.size(); ++i) {
    const ojson& it = items[i];
    if (!it.is_object() || it.value("type", "") != "item_reference") {
      out.push_back(it);
      continue;
    }
    const std::string w = indexed("input", i);
    const std::string& id = string_field(it, "id", w);
    const auto found = by_id.find(id);
    if (found == by_id.end())
      throw ApiError(400,
                     w + ": item_reference \"" + id +
                         "\" names no item of this request; this server stores no responses, so "
                         "send the item itself",
                     w + ".id");
    out.push_back(*found->second);
  }
  return out;
}

// Builds the Chat messages from the input items: calls join one assistant turn, reasoning is
// attached to the assistant turn that follows it, outputs become tool messages.
class InputConverter {
 public:
  InputConverter(const ToolTable& table, ojson* msgs) : table_(table), msgs_(*msgs) {}

  void item(const ojson& item, const std::string& w) {
    if (!item.is_object()) throw ApiError(400, w + " must be an object", w);
    const std::string type = item.contains("type") && item["type"].is_string()
                                 ? item["type"].get<std::string>()
                                 : (item.contains("role") ? "message" : "");
    if (type == "message") {
      message(item, w);
    } else if (type == "reasoning") {
      if (have_reasoning_) pending_reasoning_ += "\n\n";
      pending_reasoning_ += reasoning_text(item);
      have_reasoning_ = true;
    } else if (type == "function_call") {
      for (const char* k : {"call_id", "name", "arguments"}) (void)string_field(item, k, w);
      call(item["call_id"], table_.shown(opt_str(item, "namespace"), opt_str(item, "name")),
           item["arguments"]);
    } else if (type == "custom_tool_call") {
      for (const char* k : {"call_id", "name", "input"}) (void)string_field(item, k, w);
      call(item["call_id"], table_.shown(opt_str(item, "namespace"), opt_str(item, "name")),
           json_text({{"input", item["input"]}}));
    } else if (type == "local_shell_call") {
      (void)string_field(item, "call_id", w);
      const auto a = item.find("action");
      if (a == item.end() || !a->is_object())
        throw ApiError(400, w + ".action must be an object", w + ".action");
      ojson args = *a;
      args.erase("type");
      call(item["call_id"], kLocalShellName, json_text(args));
    } else if (type == "function_call_output" || type == "custom_tool_call_output" ||
               type == "local_shell_call_output") {
      output(item, w, type == "local_shell_call_output");
    } else if (type == "compaction") {
      // a summary of the conversation so far; kept as text (nothing here is encrypted)
      msgs_.push_back({{"role", "system"},
                       {"content", "Summary of the earlier conversation:\n\n" +
                                       string_field(item, "encrypted_content", w)}});
      assistant_open_ = false;
    } else {
      throw ApiError(400, w + ".type \"" + type + "\" is not supported", w + ".type");
    }
  }

 private:
  void message(const ojson& item, const std::string& w) {
    std::string role = opt_str(item, "role");
    if (role == "developer") role = "system";
    if (role != "user" && role != "assistant" && role != "system")
      throw ApiError(400, w + ".role must be user, assistant, system or developer", w + ".role");
    if (!item.contains("content")) throw ApiError(400, w + ".content is required", w + ".content");
    ojson m = {{"role", role},
               {"content", convert_content(item["content"], w + ".content", role != "user")}};
    if (role == "assistant") take_reasoning(&m);
    msgs_.push_back(std::move(m));
    assistant_open_ = role == "assistant";
  }

  void call(const ojson& call_id, const std::string& name, const ojson& arguments) {
    if (!assistant_open_) {
      msgs_.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", ojson::array()}});
      assistant_open_ = true;
    }
    ojson& a = msgs_.back();
    take_reasoning(&a);
    if (!a.contains("tool_calls")) a["tool_calls"] = ojson::array();
    a["tool_calls"].push_back({{"id", call_id},
                               {"type", "function"},
                               {"function", {{"name", name}, {"arguments", arguments}}}});
  }

  // local_shell_call_output names its call by "id" (the call's call_id); the others by call_id.
  void output(const ojson& item, const std::string& w, bool by_id) {
    const char* key = by_id && !item.contains("call_id") ? "id" : "call_id";
    const std::string& id = string_field(item, key, w);
    ojson out = item.contains("output") ? item["output"] : ojson("");
    if (out.is_array()) out = convert_content(out, w + ".output", false);
    if (!out.is_string() && !out.is_array())
      throw ApiError(400, w + ".output must be a string or an array of content parts",
                     w + ".output");
    msgs_.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", out}});
    assistant_open_ = false;
  }

  void take_reasoning(ojson* m) {
    if (!have_reasoning_) return;
    (*m)["reasoning_content"] = pending_reasoning_;
    have_reasoning_ = false;
    pending_reasoning_.clear();
  }

  const ToolTable& table_;
  ojson& msgs_;
  std::string pending_reasoning_;
  bool have_reasoning_ = false;
  bool assistant_open_ = false;  // the last message is an assistant turn calls can join
};

// reasoning, text.format -> reasoning_effort, response_format; the summary flag.
void convert_output_settings(const ojson& body, ResponsesRequest* r, const Warn& warn) {
  ojson& chat = r->chat;
  if (const auto it = body.find("reasoning"); it != body.end() && !it->is_null()) {
    if (!it->is_object()) throw ApiError(400, "reasoning must be an object", "reasoning");
    if (const auto e = it->find("effort"); e != it->end() && !e->is_null())
      chat["reasoning_effort"] = *e;  // "none" turns thinking off
    for (const char* k : {"summary", "generate_summary"})
      if (const auto s = it->find(k); s != it->end() && !s->is_null()) {
        if (!s->is_string() || (*s != "auto" && *s != "concise" && *s != "detailed"))
          throw ApiError(
              400, std::string("reasoning.") + k + " must be \"auto\", \"concise\" or \"detailed\"",
              std::string("reasoning.") + k);
        r->summary = true;
      }
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
    if (it->contains("verbosity") && !(*it)["verbosity"].is_null())
      warn_once(warn, "responses:text.verbosity",
                "text.verbosity is not honoured: the answer's length follows the model");
  }
  if (const auto it = body.find("include"); it != body.end() && it->is_array())
    for (const auto& v : *it) {
      if (v == "reasoning.encrypted_content") {
        r->encrypted_reasoning = true;
      } else if (v.is_string()) {
        warn_once(warn, "responses:include." + v.get<std::string>(),
                  "include \"" + v.get<std::string>() + "\" is not honoured");
      }
    }
}

}  // namespace

ResponsesRequest responses_to_chat(const ojson& body, const Warn& warn) {
  if (!body.is_object()) throw ApiError(400, "request body must be a JSON object");
  for (const char* k : {"previous_response_id", "conversation"})
    if (body.contains(k) && !body[k].is_null())
      throw ApiError(400,
                     std::string(k) +
                         " is not supported: this server stores no responses; send the whole "
                         "conversation in input",
                     k);
  ResponsesRequest r;
  ojson& chat = r.chat;
  chat = ojson::object();
  chat["model"] = body.contains("model") ? body["model"] : ojson();
  for (const char* k : {"temperature", "top_p", "stream", kTestOutputField})
    if (body.contains(k)) chat[k] = body[k];
  if (body.contains("max_output_tokens")) chat["max_tokens"] = body["max_output_tokens"];
  convert_output_settings(body, &r, warn);

  ToolTable table(warn);
  if (const auto it = body.find("tools"); it != body.end() && !it->is_null()) {
    table.add_all(*it);
    ojson tools = ojson::array();
    table.finish(&tools, &r.tools);
    if (!tools.empty()) chat["tools"] = std::move(tools);
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
    const ojson items = resolve_references(*iit);
    InputConverter conv(table, &msgs);
    for (size_t i = 0; i < items.size(); ++i) conv.item(items[i], indexed("input", i));
  } else {
    throw ApiError(400, "input must be a string or an array of items", "input");
  }
  chat["messages"] = std::move(msgs);

  if (const auto it = body.find("tool_choice"); it != body.end() && !it->is_null())
    convert_tool_choice(*it, table, &chat);
  return r;
}

}  // namespace cedar::server
