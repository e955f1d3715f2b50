#include "text/dsml.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "base/json_limits.h"

namespace cedar::text {

std::string effort_line(int effort) {
  return "Reasoning Effort: " + std::to_string(effort) +
         " (range 1-100, the higher the value, the more thorough the reasoning)\n\n";
}

// Python's float repr: the shortest digits that round-trip (std::to_chars gives the same
// digits), written positionally when the decimal exponent is in (-4, 16] and in exponent form
// otherwise ("1e-05", "1.5e+16": at least two exponent digits, explicit sign).
std::string py_float_repr(double v) {
  if (!std::isfinite(v))
    throw std::runtime_error("cannot write NaN or Infinity as JSON in a prompt");
  if (v == 0.0) return std::signbit(v) ? "-0.0" : "0.0";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  const std::string_view s(buf, r.ptr - buf);  // "-d.ddde+XX" or "de-XX"
  std::string out;
  std::size_t i = 0;
  if (s[0] == '-') {
    out += '-';
    i = 1;
  }
  const std::size_t epos = s.find('e');
  std::string digits;
  for (std::size_t k = i; k < epos; ++k)
    if (s[k] != '.') digits += s[k];
  int exp10 = 0;
  std::from_chars(s.data() + epos + 1 + (s[epos + 1] == '+' ? 1 : 0), s.data() + s.size(), exp10);
  const int decpt = exp10 + 1;  // value = 0.DIGITS * 10^decpt
  const int nd = static_cast<int>(digits.size());
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) {
      out += "0.";
      out.append(static_cast<std::size_t>(-decpt), '0');
      out += digits;
    } else if (decpt >= nd) {
      out += digits;
      out.append(static_cast<std::size_t>(decpt - nd), '0');
      out += ".0";
    } else {
      out.append(digits, 0, static_cast<std::size_t>(decpt));
      out += '.';
      out.append(digits, static_cast<std::size_t>(decpt));
    }
  } else {
    out += digits[0];
    if (nd > 1) {
      out += '.';
      out.append(digits, 1);
    }
    char eb[16];
    std::snprintf(eb, sizeof eb, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    out += eb;
  }
  return out;
}

void json_quote_append(std::string_view s, std::string* out) {
  out->push_back('"');
  json_escape_append(s, out);
  out->push_back('"');
}

void json_escape_append(std::string_view s, std::string* out) {
  static const char* kHex = "0123456789abcdef";
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (c < 0x20) {
          *out += "\\u00";
          out->push_back(kHex[c >> 4]);
          out->push_back(kHex[c & 15]);
        } else {
          out->push_back(ch);
        }
    }
  }
}

namespace {

// Values reach the printer parsed with parse_untrusted_json (at most kMaxJsonDepth levels) and
// wrapped a few levels deeper at most; the bound keeps a value built some other way from
// recursing without limit.
constexpr int kMaxPrintDepth = 2 * kMaxJsonDepth;

void py_json_append_at(const ojson& v, int depth, std::string* out) {
  if (depth > kMaxPrintDepth)
    throw std::runtime_error("JSON nested deeper than " + std::to_string(kMaxPrintDepth) +
                             " levels cannot be written in a prompt");
  switch (v.type()) {
    case ojson::value_t::null:
      *out += "null";
      break;
    case ojson::value_t::boolean:
      *out += v.get<bool>() ? "true" : "false";
      break;
    case ojson::value_t::number_integer:
      *out += std::to_string(v.get<int64_t>());
      break;
    case ojson::value_t::number_unsigned:
      *out += std::to_string(v.get<uint64_t>());
      break;
    case ojson::value_t::number_float:
      *out += py_float_repr(v.get<double>());
      break;
    case ojson::value_t::string:
      json_quote_append(v.get_ref<const std::string&>(), out);
      break;
    case ojson::value_t::array: {
      out->push_back('[');
      bool first = true;
      for (const auto& e : v) {
        if (!first) *out += ", ";
        first = false;
        py_json_append_at(e, depth + 1, out);
      }
      out->push_back(']');
      break;
    }
    case ojson::value_t::object: {
      out->push_back('{');
      bool first = true;
      for (const auto& [k, e] : v.items()) {
        if (!first) *out += ", ";
        first = false;
        json_quote_append(k, out);
        *out += ": ";
        py_json_append_at(e, depth + 1, out);
      }
      out->push_back('}');
      break;
    }
    default:
      throw std::runtime_error("cannot write a binary/discarded JSON value in a prompt");
  }
}

}  // namespace

void py_json_append(const ojson& v, std::string* out) { py_json_append_at(v, 0, out); }

std::string py_json_dumps(const ojson& v) {
  std::string s;
  py_json_append(v, &s);
  return s;
}

void PromptBuilder::add(std::string_view s, bool is_template) {
  if (s.empty()) return;
  text_.append(s);
  if (!segments_.empty() && segments_.back().is_template == is_template)
    segments_.back().text.append(s);
  else
    segments_.push_back({std::string(s), is_template});
}
void PromptBuilder::tmpl(std::string_view s) { add(s, true); }
void PromptBuilder::content(std::string_view s) { add(s, false); }

// ref: encoding.py TOOLS_TEMPLATE (V4.1 tag names). Verbatim text; only the schema lines are
// client content.
void render_tools_prompt(const ojson& functions, PromptBuilder* b) {
  b->tmpl(
      "## Tools\n\n"
      "You have access to a set of tools to help answer the user's question. You can invoke "
      "tools by writing a \"<｜DSML｜ calls>\" block like the following:\n\n"
      "<｜DSML｜ calls>\n"
      "<｜DSML｜ invoke name=\"$TOOL_NAME\">\n"
      "<｜DSML｜ parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE"
      "</｜DSML｜ parameter>\n"
      "...\n"
      "</｜DSML｜ invoke>\n"
      "<｜DSML｜ invoke name=\"$TOOL_NAME2\">\n"
      "...\n"
      "</｜DSML｜ invoke>\n"
      "</｜DSML｜ calls>\n\n"
      "String parameters should be specified as is and set `string=\"true\"`. For all other "
      "types (numbers, booleans, arrays, objects), pass the value in JSON format and set "
      "`string=\"false\"`.\n\n"
      "If thinking_mode is enabled (triggered by <think>), you MUST output your complete "
      "reasoning inside <think>...</think> BEFORE any tool calls or final response.\n\n"
      "Otherwise, output directly after </think> with tool calls or final response.\n\n"
      "### Available Tool Schemas\n\n");
  bool first = true;
  for (const auto& f : functions) {
    if (!first) b->tmpl("\n");
    first = false;
    b->content(py_json_dumps(f));
  }
  b->tmpl(
      "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to invoke "
      "tool calls.\n");
}

void render_tool_calls(const std::vector<ToolCall>& calls, PromptBuilder* b) {
  b->tmpl(kDsmlCallsOpen);
  b->tmpl("\n");
  bool first_call = true;
  for (const auto& c : calls) {
    if (!first_call) b->tmpl("\n");
    first_call = false;
    b->tmpl(kDsmlInvokeOpen);
    b->content(c.name);
    b->tmpl("\">\n");
    bool first = true;
    for (const auto& [k, v] : c.arguments.items()) {
      if (!first) b->tmpl("\n");
      first = false;
      b->tmpl(kDsmlParamOpen);
      b->content(k);
      const bool is_str = v.is_string();
      b->tmpl(is_str ? "\" string=\"true\">" : "\" string=\"false\">");
      b->content(is_str ? v.get_ref<const std::string&>() : py_json_dumps(v));
      b->tmpl(kDsmlParamClose);
    }
    b->tmpl("\n");
    b->tmpl(kDsmlInvokeClose);
  }
  b->tmpl("\n");
  b->tmpl(kDsmlCallsClose);
}

ojson normalize_tool_arguments(const ojson& raw) {
  if (raw.is_object()) return raw;
  ojson v = raw;
  // A JSON string is the OpenAI form; a string that decodes to another JSON string is a
  // double-encoded object, which the release encoder also accepts.
  for (int round = 0; round < 2 && v.is_string(); ++round) {
    ojson parsed = parse_untrusted_json(v.get_ref<const std::string&>());
    if (parsed.is_discarded()) break;
    v = std::move(parsed);
  }
  if (v.is_object()) return v;
  ojson wrapped = ojson::object();
  wrapped["arguments"] = v;
  return wrapped;
}

}  // namespace cedar::text
