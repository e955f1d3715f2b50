#include "base/json_limits.h"

#include <vector>

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

namespace {

// One open array or object of the scan: for an object, its keys so far and the last one (for
// the path in the message, cut short).
struct Frame {
  bool object = false;
  size_t keys = 0;
  std::string last_key;
};

std::string path_of(const std::vector<Frame>& stack) {
  std::string path;
  for (size_t i = 0; i + 1 < stack.size(); ++i) {
    if (stack[i].object) {
      path += (path.empty() ? "" : ".") + stack[i].last_key;
    } else {
      path += "[]";
    }
  }
  return path.empty() ? "the top level" : "`" + path + "`";
}

}  // namespace

std::string json_limit_violation(std::string_view text, const JsonLimits& limits) {
  std::vector<Frame> stack;
  bool in_string = false, escaped = false;
  size_t string_start = 0;
  std::string_view last_string;  // the raw text of the last string closed (a key before ':')
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
        last_string = text.substr(string_start, i - string_start);
      }
      continue;
    }
    switch (c) {
      case '"':
        in_string = true;
        string_start = i + 1;
        break;
      case '[':
      case '{':
        if (int(stack.size()) >= limits.max_depth)
          return "JSON nested deeper than " + std::to_string(limits.max_depth) +
                 " levels of arrays/objects";
        stack.push_back(Frame{c == '{', 0, {}});
        break;
      case ']':
      case '}':
        if (!stack.empty()) stack.pop_back();
        break;
      case ':':
        if (!stack.empty() && stack.back().object) {
          Frame& f = stack.back();
          if (last_string.size() > limits.max_key_bytes)
            return "a JSON object key in " + path_of(stack) + " is longer than " +
                   std::to_string(limits.max_key_bytes) + " bytes";
          if (++f.keys > limits.max_object_keys) {
            f.last_key.clear();
            return "a JSON object in " + path_of(stack) + " has more than " +
                   std::to_string(limits.max_object_keys) + " keys";
          }
          f.last_key.assign(last_string.substr(0, 64));
        }
        break;
      default:
        break;
    }
  }
  return "";
}

ojson parse_untrusted_json(std::string_view text, std::string* error, const JsonLimits& limits) {
  if (std::string why = json_limit_violation(text, limits); !why.empty()) {
    if (error) *error = std::move(why);
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
