// OpenAI request bodies -> the messages the V4.1 chat encoder renders.
//
// parse_chat_request validates a Chat Completions body (v41-interface.md §5.2) and maps it onto
// the release encoder's message model (§3.3): thinking switch and reasoning effort (§3.2,
// v41-extras §4), request-level tools / response_format moved onto a leading system message,
// image parts (§3.8), tool messages, Chat Prefix Completion (§3.10). parse_completion_request
// does the same for a FIM completions body (§3.11). Every rejection is a RequestError whose
// message a server can return as an HTTP 400 body; see docs/CHAT_TEMPLATE.md.
#pragma once

#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "text/dsml.h"

namespace cedar::text {

// A request the server must refuse; `what()` is the message for the client, `param` the request
// field at fault ("messages[2].content", "reasoning_effort"), `status` the HTTP status.
class RequestError : public std::runtime_error {
 public:
  explicit RequestError(const std::string& message, std::string param = {}, int status = 400)
      : std::runtime_error(message), param_(std::move(param)), status_(status) {}
  const std::string& param() const { return param_; }
  int status() const { return status_; }

 private:
  std::string param_;
  int status_;
};

enum class Role { kSystem, kUser, kAssistant, kTool, kLatestReminder };
const char* role_name(Role r);

struct ContentBlock {
  enum class Kind { kText, kImage, kToolResult };
  Kind kind = Kind::kText;
  std::string text;                 // kText: the text; kImage: the image URL / data URI
  std::string tool_call_id;         // kToolResult
  std::vector<ContentBlock> parts;  // kToolResult: its kText / kImage parts
};

struct Message {
  Role role = Role::kUser;
  std::string content;                           // system, assistant, latest_reminder
  std::vector<ContentBlock> blocks;              // user (text/image parts), tool (one kToolResult)
  std::optional<std::string> reasoning_content;  // assistant
  std::vector<ToolCall> tool_calls;              // assistant (arguments normalised to objects)
  ojson tools;            // system at index 0 only: OpenAI function objects, or null
  ojson response_format;  // system at index 0 only: object, or null
  bool prefix = false;    // assistant, last message: continued, rendered without EOS
  std::string task;       // extension (release encoder quick-instruction tasks), "" = none
};

enum class ToolChoice { kAuto, kNone, kRequired, kNamed };

// Where generated text starts, so the output parser can be set up to match the prompt.
enum class GenerationStart { kReasoning, kContent, kToolCalls };

struct ChatRequest {
  std::vector<Message> messages;
  bool thinking = true;
  int reasoning_effort = 75;  // validated even when thinking is off (release encoder)
  ToolChoice tool_choice = ToolChoice::kAuto;
  // The function objects offered to the model (after tool_choice filtering; empty if none):
  // what the output parser uses as the schema for argument types.
  ojson tools = ojson::array();
};

struct FimRequest {
  std::string prompt;
  std::optional<std::string> suffix;
};

// Effort from the request value: null/absent -> 75; integer 1..100; "low"=50, "high"=75,
// "max"=100 and the API aliases "minimal"->low, "medium"/"xhigh"->high, "ultra"->max.
// Anything else throws RequestError (param "reasoning_effort").
int parse_reasoning_effort(const ojson& v);

// Throws RequestError (never a crash) on anything invalid; see the header comment.
ChatRequest parse_chat_request(const ojson& body);
FimRequest parse_completion_request(const ojson& body);

}  // namespace cedar::text
