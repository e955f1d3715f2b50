// OpenAI Responses API requests (v41-interface.md §5.6), stateless: a Responses body converted to
// the Chat Completions body prepare_chat takes, plus what the answer's output items need to know
// of the tools the model was offered.
//
// Input items: message (user / assistant / system / developer), reasoning, function_call,
// function_call_output, custom_tool_call(_output), local_shell_call(_output), compaction (kept as
// text) and item_reference (resolved to an item of the same request). Tools: function, namespace
// (its tools flattened into the offered ones), custom (a freeform string input; a regex format
// enforced where structured output holds it), local_shell; web_search is ignored with a warning.
#pragma once

#include <map>
#include <string>

#include "server/api_common.h"
#include "server/field_warnings.h"

namespace cedar::server {

// One tool as the Responses client declared it, by the function name the model sees.
struct ResponsesTool {
  enum class Kind { kFunction, kCustom, kLocalShell };
  Kind kind = Kind::kFunction;
  std::string name;  // the client's name (inside its namespace)
  std::string ns;    // the namespace, "" for none
};

struct ResponsesRequest {
  ojson chat;                                  // the Chat Completions body
  std::map<std::string, ResponsesTool> tools;  // by the name the model sees
  bool summary = false;              // reasoning.summary set: reasoning items carry a summary
  bool encrypted_reasoning = false;  // include: reasoning.encrypted_content
};

// The reasoning text carried in a reasoning item's encrypted_content: this server does not
// encrypt, it marks the text so that an item sent back restores the reasoning exactly.
inline constexpr std::string_view kReasoningCarrier = "cedar-reasoning-text:";

// Throws ApiError 400 naming the field; fields that cannot be honoured are passed to `warn`.
ResponsesRequest responses_to_chat(const ojson& body, const Warn& warn = {});

}  // namespace cedar::server
