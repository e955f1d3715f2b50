// Incremental parser from generated V4.1 text to OpenAI assistant-message events
// (v41-interface.md §3.12; our choices in docs/CHAT_TEMPLATE.md).
//
// Feed it the decoded completion text in chunks of any size (special tokens included as text:
// "</think>", "｜DSML｜", "<｜end▁of▁sentence｜>"). It emits reasoning and content deltas,
// tool-call begin (id, name), argument deltas and tool-call end. Guarantees, whatever the split:
//   - the concatenated deltas and the final message are the same for every chunking;
//   - every delta is valid UTF-8 and no part of a DSML tag (nor of "</think>" / EOS) reaches a
//     content, reasoning or argument delta: a possible tag prefix is held back until decided;
//   - the arguments of each call, concatenated, are one valid JSON object, typed by the tool
//     schema when one is given (strings stay strings, other types as declared);
//   - malformed DSML never throws and never reaches the visible text: an open call is closed with
//     valid JSON, the rest of the block is dropped (up to its close, the reasoning's end or the
//     output's end), a stray DSML tag outside a block is dropped the same way, and so is a calls
//     block when no tools were offered; ParsedMessage::malformed says so.
#pragma once

#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "text/chat_request.h"
#include "text/dsml.h"

namespace cedar::text {

struct ParserOptions {
  // kReasoning: the prompt ended with "<think>" (thinking mode); kContent: with "</think>";
  // kToolCalls: with a forced "<｜DSML｜ calls>\n" (RenderResult::start says which).
  GenerationStart start = GenerationStart::kContent;
  bool parse_tool_calls = true;  // false (no tools offered): a DSML calls block is dropped
  ojson tools = ojson::array();  // OpenAI tools (or bare function objects) typing the arguments
  // Tool-call ids are id_prefix + call index ("call_0", "call_1", ...). A server should make the
  // prefix unique per completion ("call_<completion id>_").
  std::string id_prefix = "call_";
};

struct ParseEvent {
  enum class Kind {
    kReasoningDelta,
    kContentDelta,
    kToolCallBegin,
    kToolCallArguments,
    kToolCallEnd
  };
  Kind kind = Kind::kContentDelta;
  int index = -1;    // tool call index (tool-call events)
  std::string text;  // delta text (reasoning / content / arguments)
  std::string id;    // kToolCallBegin
  std::string name;  // kToolCallBegin
  bool cut = false;  // kToolCallEnd: the output ended or broke inside the call
};

struct ParsedMessage {
  std::string content;
  std::string reasoning_content;
  bool thinking = false;             // reasoning_content is meaningful
  std::vector<ToolCall> tool_calls;  // arguments_json: the streamed JSON text
  bool saw_eos = false;              // "<｜end▁of▁sentence｜>" was seen
  bool malformed = false;            // some DSML could not be parsed (see `problem`)
  std::string problem;               // first problem, for logs

  // {"role":"assistant","content","reasoning_content","tool_calls":[{"id","type":"function",
  //  "function":{"name","arguments"}}]}; content is null when empty and there are tool calls,
  // reasoning_content null unless thinking.
  ojson to_openai() const;
};

class OutputParser {
 public:
  explicit OutputParser(ParserOptions opts = {});

  // Appends the events that `chunk` completes to *events.
  void feed(std::string_view chunk, std::vector<ParseEvent>* events);
  // End of generation: flushes held-back text, closes an unterminated call (malformed).
  void finish(std::vector<ParseEvent>* events);
  // The message so far (complete after finish()).
  const ParsedMessage& message() const { return msg_; }

  // Parses a whole completion at once.
  static ParsedMessage parse(std::string_view text, ParserOptions opts = {});

 private:
  enum class State { kReasoning, kContent, kBlock, kInvoke, kValue, kAfterBlock, kDropped, kDone };
  enum class Attr { kTrue, kFalse, kMissing };

  bool step(bool final, std::vector<ParseEvent>* ev);  // false: needs more input
  bool step_text(bool final, std::vector<ParseEvent>* ev);
  bool stray_marker(std::size_t at, bool final, std::vector<ParseEvent>* ev);
  bool step_dropped(bool final, std::vector<ParseEvent>* ev);
  bool step_tags(bool final, std::vector<ParseEvent>* ev);
  bool step_value(bool final, std::vector<ParseEvent>* ev);
  bool parse_invoke_header(std::size_t lit, bool final, std::vector<ParseEvent>* ev);
  bool parse_param_header(std::size_t lit, bool final, std::vector<ParseEvent>* ev);

  void emit_text(std::string_view s, std::vector<ParseEvent>* ev);
  void emit_args(std::string_view s, std::vector<ParseEvent>* ev);
  void finish_value(std::vector<ParseEvent>* ev);
  void close_call(std::vector<ParseEvent>* ev, bool cut = false);
  void malformed(const std::string& why, std::vector<ParseEvent>* ev);
  const std::set<std::string>* param_types(const std::string& key) const;

  ParserOptions opts_;
  State state_;
  State resume_ = State::kContent;  // the text state a calls block or a dropped stretch left
  std::string buf_;                 // unconsumed input
  ParsedMessage msg_;

  // Current call / parameter.
  bool call_open_ = false;
  int params_ = 0;
  std::set<std::string> keys_;
  std::string key_;
  Attr attr_ = Attr::kMissing;
  bool stream_string_ = false;  // value streamed as a JSON string as it arrives
  std::string value_;           // buffered value (non-streamed)

  // tool name -> parameter -> declared JSON types (empty set: unknown)
  std::map<std::string, std::map<std::string, std::set<std::string>>> schema_;
};

}  // namespace cedar::text
