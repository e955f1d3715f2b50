// DSML, the V4.1 tool-call markup, and the JSON spelling the V4.1 prompt uses
// (v41-interface.md §3.5).
//
// Everything the chat encoder writes goes through a PromptBuilder, which keeps the rendered text
// and, alongside it, a segment list saying which bytes are template (to be tokenized with
// added-token recognition) and which are message content (always plain BPE, §2.4).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace cedar::text {

// Request JSON keeps the client's key order: the prompt spells objects in that order.
using ojson = nlohmann::ordered_json;

// --- V4.1 template strings (§3.1) -------------------------------------------------------------
inline constexpr std::string_view kBos = "<｜begin▁of▁sentence｜>";
inline constexpr std::string_view kEos = "<｜end▁of▁sentence｜>";
inline constexpr std::string_view kSystemTok = "<｜System｜>";
inline constexpr std::string_view kUserTok = "<｜User｜>";
inline constexpr std::string_view kAssistantTok = "<｜Assistant｜>";
inline constexpr std::string_view kLatestReminderTok = "<｜latest_reminder｜>";
inline constexpr std::string_view kThinkStart = "<think>";
inline constexpr std::string_view kThinkEnd = "</think>";
inline constexpr std::string_view kImagePlaceholder = "<｜deepseek_image｜>";
inline constexpr std::string_view kFimBegin = "<｜fim▁begin｜>";
inline constexpr std::string_view kFimHole = "<｜fim▁hole｜>";
inline constexpr std::string_view kFimEnd = "<｜fim▁end｜>";
inline constexpr std::string_view kToolResultOpen = "<tool_result>";
inline constexpr std::string_view kToolResultClose = "</tool_result>";

// The DSML tag marker: one added token of the vocabulary, inside every DSML tag.
inline constexpr std::string_view kDsmlMarker = "｜DSML｜";
// DSML tags of V4.1 (the tag names carry a leading space; V4 had none).
inline constexpr std::string_view kDsmlCallsOpen = "<｜DSML｜ calls>";
inline constexpr std::string_view kDsmlCallsClose = "</｜DSML｜ calls>";
inline constexpr std::string_view kDsmlInvokeOpen = "<｜DSML｜ invoke name=\"";  // NAME">
inline constexpr std::string_view kDsmlInvokeClose = "</｜DSML｜ invoke>";
inline constexpr std::string_view kDsmlParamOpen = "<｜DSML｜ parameter name=\"";  // K" string="B">
inline constexpr std::string_view kDsmlParamClose = "</｜DSML｜ parameter>";
// The V4 spellings, accepted (never produced) by the output parser.
inline constexpr std::string_view kDsmlV4CallsOpen = "<｜DSML｜tool_calls>";
inline constexpr std::string_view kDsmlV4CallsClose = "</｜DSML｜tool_calls>";
inline constexpr std::string_view kDsmlV4InvokeOpen = "<｜DSML｜invoke name=\"";
inline constexpr std::string_view kDsmlV4InvokeClose = "</｜DSML｜invoke>";
inline constexpr std::string_view kDsmlV4ParamOpen = "<｜DSML｜parameter name=\"";
inline constexpr std::string_view kDsmlV4ParamClose = "</｜DSML｜parameter>";

// "Reasoning Effort: N (range 1-100, ...)\n\n" (§3.1, v41-extras §4).
std::string effort_line(int effort);

// --- JSON spelled like Python json.dumps(v, ensure_ascii=False) (§3.5) ------------------------
// Separators ", " and ": ", key order kept, non-ASCII raw, control characters as \u00XX (lower
// case hex) except \b \f \n \r \t, floats as Python repr (0.0, -0.0, 0.0001, 1e-05, 1e+16).
// Throws std::runtime_error on NaN/Infinity (json.dumps would write the non-JSON "NaN").
std::string py_json_dumps(const ojson& v);
void py_json_append(const ojson& v, std::string* out);
// Python repr() of a finite double.
std::string py_float_repr(double v);
// A JSON string literal for s (quotes included), escaped as py_json_dumps does.
void json_quote_append(std::string_view s, std::string* out);
// The same escaping without the quotes. Byte-wise, so escaping a string in pieces gives the
// escaping of the whole.
void json_escape_append(std::string_view s, std::string* out);

// --- The prompt with its template/content segmentation (§2.4) ---------------------------------
struct PromptSegment {
  std::string text;
  // true: template text, tokenized with added-token recognition ("<｜User｜>" is one id);
  // false: message content (text, reasoning, tool schemas and arguments, tool results), always
  // plain BPE so that a user who types "<｜User｜>" gets ordinary tokens.
  bool is_template = false;
};

class PromptBuilder {
 public:
  void tmpl(std::string_view s);
  void content(std::string_view s);
  const std::string& text() const { return text_; }
  const std::vector<PromptSegment>& segments() const { return segments_; }
  std::string take_text() { return std::move(text_); }
  std::vector<PromptSegment> take_segments() { return std::move(segments_); }

 private:
  void add(std::string_view s, bool is_template);
  std::string text_;
  std::vector<PromptSegment> segments_;  // adjacent segments of one kind are merged
};

// --- Tools ------------------------------------------------------------------------------------
// One assistant tool call as the encoder renders it and the output parser returns it.
struct ToolCall {
  std::string id;
  std::string name;
  // Encoder: the arguments object. Parser: the arguments JSON text as streamed (a valid JSON
  // object) is in `arguments_json`; `arguments` is its parsed form.
  ojson arguments = ojson::object();
  std::string arguments_json;
};

// ref: encoding.py render_tools. "## Tools ... ### Available Tool Schemas\n\n{schemas}\n\n...".
// `functions` is the list of OpenAI function objects ({"name", "description", "parameters"...});
// each is spelled with py_json_dumps, every key the client sent kept.
void render_tools_prompt(const ojson& functions, PromptBuilder* b);

// ref: encoding.py encode_arguments_to_dsml + tool_calls_template. Writes
// "<｜DSML｜ calls>\n<｜DSML｜ invoke name=\"N\">\n<params>\n</｜DSML｜ invoke>\n...</｜DSML｜
// calls>" (without the "\n\n" that separates it from the content). String values are written raw,
// other values with py_json_dumps; zero parameters give an empty line.
void render_tool_calls(const std::vector<ToolCall>& calls, PromptBuilder* b);

// The arguments of a history tool call as an object (release encoder rules, §3.13 corrections):
// an object is used as is; a JSON string is parsed, and parsed again if it held a JSON-encoded
// string; anything that is still not an object is wrapped as {"arguments": value}.
ojson normalize_tool_arguments(const ojson& raw);

}  // namespace cedar::text
