#include "base/json_limits.h"

namespace cedar {

using ojson = nlohmann::ordered_json;

int json_nesting_depth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        break;
      case '[':
      case '{':
        if (++depth > deepest) {
          deepest = depth;
          if (deepest > limit) return limit + 1;
        }
        break;
      case ']':
      case '}':
        if (depth > 0) --depth;
        break;
      default:
        break;
    }
  }
  return deepest;
}

ojson parse_untrusted_json(std::string_view text, std::string* error, int max_depth) {
  if (json_nesting_depth(text, max_depth) > max_depth) {
    if (error)
      *error = "JSON nested deeper than " + std::to_string(max_depth) + " levels of arrays/objects";
    return ojson(ojson::value_t::discarded);
  }
  ojson v = ojson::parse(text, nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded() && error) {
    try {
      const ojson again = ojson::parse(text);  // again, for the message with the position
      (void)again;
      *error = "invalid JSON";
    } catch (const ojson::exception& e) {  // parse_error, or out_of_range for 1e999
      *error = e.what();
    }
  }
  return v;
}

}  // namespace cedar
