#include "text/chat_request.h"

#include <algorithm>
#include <cctype>
#include <set>

namespace cedar::text {

const char* role_name(Role r) {
  switch (r) {
    case Role::kSystem:
      return "system";
    case Role::kUser:
      return "user";
    case Role::kAssistant:
      return "assistant";
    case Role::kTool:
      return "tool";
    case Role::kLatestReminder:
      return "latest_reminder";
  }
  return "?";
}

namespace {

// Short, readable rendering of a bad value for an error message.
std::string show(const ojson& v) {
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

const char* type_name(const ojson& v) {
  switch (v.type()) {
    case ojson::value_t::null:
      return "null";
    case ojson::value_t::boolean:
      return "a boolean";
    case ojson::value_t::string:
      return "a string";
    case ojson::value_t::array:
      return "an array";
    case ojson::value_t::object:
      return "an object";
    default:
      return "a number";
  }
}

// The release encoder refuses a literal image placeholder in any text: images must come as
// content parts, and a placeholder typed by the user would otherwise shift the image list.
void check_no_placeholder(const std::string& text, const std::string& param) {
  if (text.find(kImagePlaceholder) != std::string::npos)
    throw RequestError(param + " contains the image placeholder \"" +
                           std::string(kImagePlaceholder) +
                           "\", which is not allowed in text; send images as image_url "
                           "content parts",
                       param);
}

std::string image_url_of(const ojson& part, const std::string& param) {
  const ojson* src = nullptr;
  if (part.contains("image_url"))
    src = &part["image_url"];
  else if (part.contains("url"))
    src = &part["url"];
  else if (part.contains("data"))
    src = &part["data"];
  if (src && src->is_object() && src->contains("url")) src = &(*src)["url"];
  if (!src || !src->is_string() || src->get_ref<const std::string&>().empty())
    throw RequestError(param + ": image part has no image_url.url", param);
  return src->get<std::string>();
}

// Content parts (OpenAI "text" / "image_url"; the release encoder's "image" too).
std::vector<ContentBlock> parse_parts(const ojson& arr, const std::string& param, bool allow_images,
                                      const char* role) {
  std::vector<ContentBlock> out;
  for (std::size_t j = 0; j < arr.size(); ++j) {
    const std::string p = param + "[" + std::to_string(j) + "]";
    const ojson& part = arr[j];
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      throw RequestError(p + " must be an object with a string \"type\"", p);
    const std::string type = part["type"].get<std::string>();
    if (type == "text") {
      if (!part.contains("text") || !part["text"].is_string())
        throw RequestError(p + ".text must be a string", p + ".text");
      ContentBlock b;
      b.text = part["text"].get<std::string>();
      check_no_placeholder(b.text, p + ".text");
      out.push_back(std::move(b));
    } else if (type == "image_url" || type == "image") {
      if (!allow_images)
        throw RequestError(std::string("Image in ") + role + " message is unsupported", p);
      ContentBlock b;
      b.kind = ContentBlock::Kind::kImage;
      b.text = image_url_of(part, p);
      out.push_back(std::move(b));
    } else {
      throw RequestError(
          p + ".type \"" + type + "\" is not supported (expected \"text\" or \"image_url\")",
          p + ".type");
    }
  }
  return out;
}

// Text content of a system / assistant / latest_reminder message: a string, or text parts
// joined by "\n\n" (the release encoder's join); null allowed where `allow_null`.
std::string text_content(const ojson& msg, const std::string& param, const char* role,
                         bool allow_null) {
  const auto it = msg.find("content");
  if (it == msg.end() || it->is_null()) {
    if (allow_null) return {};
    throw RequestError(param + " is required for role '" + role + "'", param);
  }
  if (it->is_string()) {
    std::string s = it->get<std::string>();
    check_no_placeholder(s, param);
    return s;
  }
  if (it->is_array()) {
    std::string s;
    const auto blocks = parse_parts(*it, param, /*allow_images=*/false, role);
    for (std::size_t k = 0; k < blocks.size(); ++k) {
      if (k) s += "\n\n";
      s += blocks[k].text;
    }
    return s;
  }
  throw RequestError(
      param + " must be a string or an array of content parts, not " + type_name(*it), param);
}

std::vector<ContentBlock> block_content(const ojson& msg, const std::string& param,
                                        const char* role) {
  const auto it = msg.find("content");
  if (it == msg.end() || it->is_null())
    throw RequestError(param + " is required for role '" + role + "'", param);
  if (it->is_string()) {
    ContentBlock b;
    b.text = it->get<std::string>();
    check_no_placeholder(b.text, param);
    return {std::move(b)};
  }
  if (it->is_array()) return parse_parts(*it, param, /*allow_images=*/true, role);
  throw RequestError(
      param + " must be a string or an array of content parts, not " + type_name(*it), param);
}

bool valid_tool_name(const std::string& n) {
  if (n.empty() || n.size() > 128) return false;
  return std::all_of(n.begin(), n.end(),
                     [](unsigned char c) { return std::isalnum(c) || c == '_' || c == '-'; });
}

// A function's "parameters" must be a JSON Schema of an object (or absent / {}).
void check_parameters_schema(const ojson& params, const std::string& param) {
  if (!params.is_object())
    throw RequestError(
        param + " must be a JSON Schema object of type \"object\", not " + type_name(params),
        param);
  if (params.contains("type") && params["type"] != "object")
    throw RequestError(param + ".type must be \"object\" (tool arguments are a JSON object), not " +
                           show(params["type"]),
                       param + ".type");
  if (params.contains("properties")) {
    const ojson& props = params["properties"];
    if (!props.is_object())
      throw RequestError(param + ".properties must be an object", param + ".properties");
    for (const auto& [k, v] : props.items())
      if (!v.is_object() && !v.is_boolean())
        throw RequestError(param + ".properties." + k + " must be a JSON Schema object",
                           param + ".properties." + k);
  }
  if (params.contains("required")) {
    const ojson& req = params["required"];
    if (!req.is_array() ||
        !std::all_of(req.begin(), req.end(), [](const ojson& e) { return e.is_string(); }))
      throw RequestError(param + ".required must be an array of strings", param + ".required");
  }
}

ojson parse_tools(const ojson& body) {
  ojson functions = ojson::array();
  const auto it = body.find("tools");
  if (it == body.end() || it->is_null()) return functions;
  if (!it->is_array()) throw RequestError("tools must be an array", "tools");
  std::set<std::string> names;
  for (std::size_t i = 0; i < it->size(); ++i) {
    const std::string p = "tools[" + std::to_string(i) + "]";
    const ojson& t = (*it)[i];
    if (!t.is_object()) throw RequestError(p + " must be an object", p);
    if (!t.contains("type") || t["type"] != "function")
      throw RequestError(p + ".type must be \"function\"", p + ".type");
    if (!t.contains("function") || !t["function"].is_object())
      throw RequestError(p + ".function must be an object", p + ".function");
    const ojson& f = t["function"];
    if (!f.contains("name") || !f["name"].is_string())
      throw RequestError(p + ".function.name must be a string", p + ".function.name");
    const std::string name = f["name"].get<std::string>();
    if (!valid_tool_name(name))
      throw RequestError(
          p + ".function.name \"" + name + "\" is invalid: 1-128 characters of [A-Za-z0-9_-]",
          p + ".function.name");
    if (!names.insert(name).second)
      throw RequestError("Tool names must be unique: \"" + name + "\" is defined twice", p);
    if (f.contains("description") && !f["description"].is_string() && !f["description"].is_null())
      throw RequestError(p + ".function.description must be a string", p + ".function.description");
    if (f.contains("strict") && !f["strict"].is_boolean() && !f["strict"].is_null())
      throw RequestError(p + ".function.strict must be a boolean", p + ".function.strict");
    if (f.contains("parameters") && !f["parameters"].is_null())
      check_parameters_schema(f["parameters"], p + ".function.parameters");
    functions.push_back(f);
  }
  return functions;
}

bool contains_json_word(const std::string& s) {
  for (std::size_t i = 0; i + 4 <= s.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(s[i])) == 'j' &&
        std::tolower(static_cast<unsigned char>(s[i + 1])) == 's' &&
        std::tolower(static_cast<unsigned char>(s[i + 2])) == 'o' &&
        std::tolower(static_cast<unsigned char>(s[i + 3])) == 'n')
      return true;
  return false;
}

bool messages_mention_json(const std::vector<Message>& msgs) {
  for (const auto& m : msgs) {
    if (contains_json_word(m.content)) return true;
    for (const auto& b : m.blocks) {
      if (contains_json_word(b.text)) return true;
      for (const auto& p : b.parts)
        if (contains_json_word(p.text)) return true;
    }
  }
  return false;
}

const std::set<std::string>& valid_tasks() {
  static const std::set<std::string> k = {"action", "query", "authority",
                                          "domain", "title", "read_url"};
  return k;
}

Message parse_message(const ojson& m, std::size_t i, bool is_last) {
  const std::string p = "messages[" + std::to_string(i) + "]";
  if (!m.is_object()) throw RequestError(p + " must be an object", p);
  if (!m.contains("role") || !m["role"].is_string())
    throw RequestError(p + ".role must be a string", p + ".role");
  const std::string role = m["role"].get<std::string>();
  Message msg;
  const std::string pc = p + ".content";
  if (role == "system") {
    msg.role = Role::kSystem;
    msg.content = text_content(m, pc, "system", /*allow_null=*/true);
  } else if (role == "user") {
    msg.role = Role::kUser;
    msg.blocks = block_content(m, pc, "user");
  } else if (role == "assistant") {
    msg.role = Role::kAssistant;
    msg.content = text_content(m, pc, "assistant", /*allow_null=*/true);
    if (m.contains("reasoning_content") && !m["reasoning_content"].is_null()) {
      if (!m["reasoning_content"].is_string())
        throw RequestError(p + ".reasoning_content must be a string", p + ".reasoning_content");
      msg.reasoning_content = m["reasoning_content"].get<std::string>();
      check_no_placeholder(*msg.reasoning_content, p + ".reasoning_content");
    }
    if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
      const ojson& tcs = m["tool_calls"];
      if (!tcs.is_array())
        throw RequestError(p + ".tool_calls must be an array", p + ".tool_calls");
      for (std::size_t j = 0; j < tcs.size(); ++j) {
        const std::string pt = p + ".tool_calls[" + std::to_string(j) + "]";
        const ojson& tc = tcs[j];
        if (!tc.is_object()) throw RequestError(pt + " must be an object", pt);
        if (tc.contains("type") && tc["type"] != "function")
          throw RequestError(pt + ".type must be \"function\"", pt + ".type");
        ToolCall call;
        if (tc.contains("id") && !tc["id"].is_null()) {
          if (!tc["id"].is_string()) throw RequestError(pt + ".id must be a string", pt + ".id");
          call.id = tc["id"].get<std::string>();
        }
        if (!tc.contains("function") || !tc["function"].is_object())
          throw RequestError(pt + ".function must be an object", pt + ".function");
        const ojson& f = tc["function"];
        if (!f.contains("name") || !f["name"].is_string() ||
            f["name"].get_ref<const std::string&>().empty())
          throw RequestError(pt + ".function.name must be a non-empty string",
                             pt + ".function.name");
        call.name = f["name"].get<std::string>();
        if (!f.contains("arguments") || !(f["arguments"].is_string() || f["arguments"].is_object()))
          throw RequestError(pt + ".function.arguments must be a JSON string (or an object)",
                             pt + ".function.arguments");
        call.arguments = normalize_tool_arguments(f["arguments"]);
        msg.tool_calls.push_back(std::move(call));
      }
    }
    if (m.contains("prefix") && !m["prefix"].is_null()) {
      if (!m["prefix"].is_boolean())
        throw RequestError(p + ".prefix must be a boolean", p + ".prefix");
      msg.prefix = m["prefix"].get<bool>();
      if (msg.prefix && !is_last)
        throw RequestError(p + ".prefix: only the last message may be a prefix", p + ".prefix");
      if (msg.prefix && !msg.tool_calls.empty())
        throw RequestError(p + ": a prefix assistant message cannot carry tool_calls", p);
    }
  } else if (role == "tool") {
    msg.role = Role::kTool;
    if (!m.contains("tool_call_id") || !m["tool_call_id"].is_string() ||
        m["tool_call_id"].get_ref<const std::string&>().empty())
      throw RequestError(p + ".tool_call_id must be a non-empty string", p + ".tool_call_id");
    ContentBlock b;
    b.kind = ContentBlock::Kind::kToolResult;
    b.tool_call_id = m["tool_call_id"].get<std::string>();
    b.parts = block_content(m, pc, "tool");
    msg.blocks.push_back(std::move(b));
  } else if (role == "latest_reminder") {
    msg.role = Role::kLatestReminder;
    if (!m.contains("content") || !m["content"].is_string())
      throw RequestError(pc + " must be a string for role 'latest_reminder'", pc);
    msg.content = m["content"].get<std::string>();
    check_no_placeholder(msg.content, pc);
  } else {
    throw RequestError(p + ".role: unknown role '" + role +
                           "' (DeepSeek-V4.1 accepts system, user, assistant, tool, "
                           "latest_reminder)",
                       p + ".role");
  }
  if (m.contains("task") && !m["task"].is_null()) {
    if (!m["task"].is_string() || !valid_tasks().count(m["task"].get<std::string>()))
      throw RequestError(p + ".task must be one of action, query, authority, domain, title, "
                             "read_url",
                         p + ".task");
    msg.task = m["task"].get<std::string>();
  }
  return msg;
}

}  // namespace

int parse_reasoning_effort(const ojson& v) {
  if (v.is_null()) return 75;
  if (v.is_number_integer()) {
    const auto n = v.get<int64_t>();
    if (n >= 1 && n <= 100) return static_cast<int>(n);
  } else if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    if (s == "low" || s == "minimal") return 50;
    if (s == "high" || s == "medium" || s == "xhigh") return 75;
    if (s == "max" || s == "ultra") return 100;
  }
  throw RequestError("Invalid reasoning_effort " + show(v) +
                         ": expected an integer in [1, 100] or one of \"low\", \"high\", \"max\" "
                         "(aliases \"minimal\", \"medium\", \"xhigh\", \"ultra\", \"none\")",
                     "reasoning_effort");
}

ChatRequest parse_chat_request(const ojson& body) {
  if (!body.is_object()) throw RequestError("request body must be a JSON object");
  ChatRequest r;

  // thinking: {"type": "enabled" | "disabled" | "adaptive"}; default enabled.
  bool thinking_explicit = false;
  if (const auto it = body.find("thinking"); it != body.end() && !it->is_null()) {
    if (!it->is_object() || !it->contains("type") || !(*it)["type"].is_string())
      throw RequestError("thinking must be an object {\"type\": \"enabled\" | \"disabled\"}",
                         "thinking");
    const std::string t = (*it)["type"].get<std::string>();
    if (t == "enabled" || t == "adaptive")
      r.thinking = true;
    else if (t == "disabled")
      r.thinking = false;
    else
      throw RequestError("thinking.type must be \"enabled\" or \"disabled\", not \"" + t + "\"",
                         "thinking.type");
    thinking_explicit = true;
  }
  // reasoning_effort: "none" switches thinking off (as the recipe's Chat Completions mapping and
  // the Responses API do); everything else is validated even when thinking is off.
  const ojson effort = body.contains("reasoning_effort") ? body["reasoning_effort"] : ojson();
  if (effort.is_string() && effort.get_ref<const std::string&>() == "none") {
    if (thinking_explicit && r.thinking)
      throw RequestError("reasoning_effort \"none\" contradicts thinking {\"type\": \"enabled\"}",
                         "reasoning_effort");
    r.thinking = false;
  } else {
    r.reasoning_effort = parse_reasoning_effort(effort);
  }

  const auto mit = body.find("messages");
  if (mit == body.end() || !mit->is_array() || mit->empty())
    throw RequestError("messages must be a non-empty array", "messages");
  const ojson& msgs = *mit;

  // Tool messages must answer a call of the most recent assistant message with tool_calls.
  std::vector<std::string> open_ids;
  bool have_calls = false;
  for (std::size_t i = 0; i < msgs.size(); ++i) {
    Message m = parse_message(msgs[i], i, i + 1 == msgs.size());
    if (m.role == Role::kAssistant) {
      have_calls = !m.tool_calls.empty();
      open_ids.clear();
      for (const auto& c : m.tool_calls) open_ids.push_back(c.id);
    } else if (m.role == Role::kTool) {
      const std::string& id = m.blocks[0].tool_call_id;
      const std::string p = "messages[" + std::to_string(i) + "]";
      if (!have_calls)
        throw RequestError(p + ": messages with role 'tool' must be a response to a preceding "
                               "message with 'tool_calls'",
                           p);
      if (std::find(open_ids.begin(), open_ids.end(), id) == open_ids.end())
        throw RequestError(p + ".tool_call_id \"" + id +
                               "\" does not match any tool call of the preceding assistant "
                               "message",
                           p + ".tool_call_id");
    }
    r.messages.push_back(std::move(m));
  }

  // tools and tool_choice (§3.6).
  ojson functions = parse_tools(body);
  if (const auto it = body.find("tool_choice"); it != body.end() && !it->is_null()) {
    std::string named;
    if (it->is_string()) {
      const std::string c = it->get<std::string>();
      if (c == "none")
        r.tool_choice = ToolChoice::kNone;
      else if (c == "auto")
        r.tool_choice = ToolChoice::kAuto;
      else if (c == "required")
        r.tool_choice = ToolChoice::kRequired;
      else
        throw RequestError(
            "tool_choice must be \"none\", \"auto\", \"required\" or "
            "{\"type\": \"function\", \"function\": {\"name\": ...}}",
            "tool_choice");
    } else if (it->is_object() && it->contains("function") && (*it)["function"].is_object() &&
               (*it)["function"].contains("name") && (*it)["function"]["name"].is_string()) {
      r.tool_choice = ToolChoice::kNamed;
      named = (*it)["function"]["name"].get<std::string>();
    } else {
      throw RequestError(
          "tool_choice must be \"none\", \"auto\", \"required\" or "
          "{\"type\": \"function\", \"function\": {\"name\": ...}}",
          "tool_choice");
    }
    if (r.tool_choice == ToolChoice::kRequired || r.tool_choice == ToolChoice::kNamed) {
      if (functions.empty())
        throw RequestError("tool_choice requires tools to be specified", "tool_choice");
      if (r.thinking)
        throw RequestError("Thinking mode does not support this tool_choice", "tool_choice");
    }
    if (r.tool_choice == ToolChoice::kNamed) {
      ojson kept = ojson::array();
      for (const auto& f : functions)
        if (f["name"] == named) kept.push_back(f);
      if (kept.empty())
        throw RequestError("tool_choice: no tool named '" + named + "' was specified",
                           "tool_choice");
      functions = std::move(kept);
    }
    if (r.tool_choice == ToolChoice::kNone) functions = ojson::array();
  }
  r.tools = functions;

  // response_format (§3.7).
  ojson response_format;
  if (const auto it = body.find("response_format"); it != body.end() && !it->is_null()) {
    if (!it->is_object() || !it->contains("type") || !(*it)["type"].is_string())
      throw RequestError("response_format must be an object with a string \"type\"",
                         "response_format");
    const std::string t = (*it)["type"].get<std::string>();
    if (t == "json_object" || t == "json_schema") {
      response_format = *it;
      if (t == "json_object" && !messages_mention_json(r.messages))
        throw RequestError(
            "Prompt must contain the word 'json' in some form to use "
            "'response_format' of type 'json_object'.",
            "response_format");
    } else if (t != "text") {
      throw RequestError(
          "response_format.type must be \"text\", \"json_object\" or "
          "\"json_schema\", not \"" +
              t + "\"",
          "response_format.type");
    }
  }

  // Request-level tools / response_format live on the first message if it is a system message;
  // otherwise an empty system message is inserted to carry them (§3.3).
  if (!functions.empty() || !response_format.is_null()) {
    if (r.messages[0].role != Role::kSystem) {
      Message sys;
      sys.role = Role::kSystem;
      r.messages.insert(r.messages.begin(), std::move(sys));
    }
    if (!functions.empty()) r.messages[0].tools = functions;
    r.messages[0].response_format = response_format;
  }
  return r;
}

FimRequest parse_completion_request(const ojson& body) {
  if (!body.is_object()) throw RequestError("request body must be a JSON object");
  FimRequest f;
  const auto it = body.find("prompt");
  if (it == body.end() || !it->is_string())
    throw RequestError("prompt must be a string (token-id and batched prompts are not supported)",
                       "prompt");
  f.prompt = it->get<std::string>();
  if (const auto s = body.find("suffix"); s != body.end() && !s->is_null()) {
    if (!s->is_string()) throw RequestError("suffix must be a string", "suffix");
    f.suffix = s->get<std::string>();
  }
  return f;
}

}  // namespace cedar::text
