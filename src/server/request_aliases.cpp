#include "server/request_aliases.h"

namespace cedar::server {

namespace {

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

}  // namespace cedar::server
