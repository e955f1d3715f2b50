#include "server/sse.h"

namespace cedar::server {

std::string json_text(const text::ojson& j) {
  return j.dump(-1, ' ', false, text::ojson::error_handler_t::replace);
}

std::string sse_data(const text::ojson& j) { return "data: " + json_text(j) + "\n\n"; }

std::string sse_event(std::string_view type, const text::ojson& j) {
  std::string s = "event: ";
  s.append(type);
  s += "\ndata: ";
  s += json_text(j);
  s += "\n\n";
  return s;
}

std::string sse_comment(std::string_view text) {
  // A comment line must not contain a newline, or the rest would be read as a field.
  std::string s = ": ";
  for (char c : text) s += (c == '\n' || c == '\r') ? ' ' : c;
  s += "\n\n";
  return s;
}

}  // namespace cedar::server
