#include "server/request_aliases.h"

#include <mutex>
#include <set>
#include <string_view>

namespace cedar::server {

namespace {

// Top-level Chat Completions fields cedar reads (request_options.cpp, chat_request.cpp,
// api_common.cpp) or maps (chat_template_kwargs).
const std::set<std::string_view>& used_fields() {
  static const std::set<std::string_view> s = {"model",
                                               "messages",
                                               "temperature",
                                               "top_p",
                                               "top_k",
                                               "min_p",
                                               "frequency_penalty",
                                               "presence_penalty",
                                               "seed",
                                               "max_tokens",
                                               "max_completion_tokens",
                                               "logprobs",
                                               "top_logprobs",
                                               "n",
                                               "stop",
                                               "stream",
                                               "stream_options",
                                               "tools",
                                               "tool_choice",
                                               "response_format",
                                               "thinking",
                                               "reasoning_effort",
                                               "cedar_test_output",
                                               "chat_template_kwargs"};
  return s;
}

// Fields that label a request and do not change its answer: accepted silently.
const std::set<std::string_view>& label_fields() {
  static const std::set<std::string_view> s = {"user",
                                               "metadata",
                                               "store",
                                               "service_tier",
                                               "prompt_cache_key",
                                               "safety_identifier",
                                               "parallel_tool_calls"};
  return s;
}

bool bool_kwarg(const ojson& kw, const char* key, bool* out) {
  const auto it = kw.find(key);
  if (it == kw.end() || !it->is_boolean()) return false;
  *out = it->get<bool>();
  return true;
}

}  // namespace

ojson apply_chat_aliases(const ojson& body) {
  if (!body.is_object()) return body;
  ojson b = body;
  if (auto it = b.find("messages"); it != b.end() && it->is_array()) {
    for (auto& m : *it) {
      if (!m.is_object()) continue;
      if (auto r = m.find("role"); r != m.end() && r->is_string() && *r == "developer")
        *r = "system";
      if (m.contains("reasoning") && !m.contains("reasoning_content")) {
        // moved out first: inserting into an ordered_json object may move its elements
        ojson r = std::move(m["reasoning"]);
        m.erase("reasoning");
        m["reasoning_content"] = std::move(r);
      }
    }
  }
  // a copy: the insertions below may move b's elements
  if (const ojson kw = b.value("chat_template_kwargs", ojson()); kw.is_object()) {
    bool on = false;
    if (!b.contains("thinking") &&
        (bool_kwarg(kw, "thinking", &on) || bool_kwarg(kw, "enable_thinking", &on)))
      b["thinking"] = {{"type", on ? "enabled" : "disabled"}};
    if (const auto e = kw.find("reasoning_effort");
        e != kw.end() && !b.contains("reasoning_effort"))
      b["reasoning_effort"] = *e;
  }
  b.erase("chat_template_kwargs");
  return b;
}

void warn_ignored_fields(const ojson& body, const std::function<void(const std::string&)>& warn) {
  if (!body.is_object() || !warn) return;
  static std::mutex mu;
  static std::set<std::string> warned;
  auto once = [&](const std::string& name, const std::string& what) {
    std::lock_guard<std::mutex> lk(mu);
    if (warned.insert(name).second) warn(what + " (warned once)");
  };
  for (const auto& [key, value] : body.items()) {
    if (used_fields().count(key) || label_fields().count(key)) continue;
    once(key, "ignoring request field \"" + key + "\": cedar does not support it");
  }
  if (const auto kw = body.find("chat_template_kwargs"); kw != body.end() && kw->is_object())
    for (const auto& [key, value] : kw->items())
      if (key != "thinking" && key != "enable_thinking" && key != "reasoning_effort")
        once("chat_template_kwargs." + key,
             "ignoring chat_template_kwargs." + key + ": the V4.1 template has no such option");
}

}  // namespace cedar::server
