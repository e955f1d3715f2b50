// OpenAI Responses API (v41-interface.md §5.6), stateless: request conversion to a Chat
// Completions body (input string or items: message, reasoning, function_call,
// function_call_output; instructions; reasoning.effort with "none" = thinking off;
// max_output_tokens; text.format; function tools; tool_choice), the response object (output items
// reasoning / message / function_call, usage with cached and reasoning tokens) and the streaming
// events (response.created, response.in_progress, response.output_item.added,
// response.content_part.added, response.reasoning_text.delta, response.output_text.delta,
// response.function_call_arguments.delta, the matching .done events, response.completed or
// response.incomplete).
#pragma once

#include <string>

#include "server/api_common.h"

namespace cedar::server {

// Throws ApiError 400 naming the field.
ojson responses_to_chat(const ojson& body);

class ResponsesFormat : public StreamFormat {
 public:
  // `request`: the original Responses body (echoed fields: instructions, tools, ...).
  ResponsesFormat(std::string id, std::string model, int64_t created, const ojson& request);
  void event(const CompletionEvent& e, const Outcome* outcome, std::string* out) override;
  ojson body(const Outcome& o) const override;

 private:
  enum class Item { kNone, kReasoning, kMessage, kFunctionCall };
  ojson response(const char* status, ojson output, const Outcome* o) const;
  void emit(const char* type, ojson payload, std::string* out);
  void open_item(Item kind, ojson item, std::string* out);
  void close_item(std::string* out);

  std::string id_, model_;
  int64_t created_;
  ojson echo_;  // request fields echoed in the response object
  int64_t seq_ = 0;
  bool started_ = false;
  Item item_ = Item::kNone;
  ojson current_;                  // the open item (its text accumulated)
  ojson output_ = ojson::array();  // finished items
};

ojson responses_usage(const Usage& u);

}  // namespace cedar::server
