// OpenAI Responses API answers (v41-interface.md §5.6): the response object (output items
// reasoning / message / function_call / custom_tool_call / local_shell_call, usage with cached and
// reasoning tokens) and the streaming events (response.created, response.in_progress,
// response.output_item.added, response.content_part.added, response.reasoning_text.delta,
// response.reasoning_summary_* when a summary was asked for, response.output_text.delta,
// response.function_call_arguments.delta, response.custom_tool_call_input.delta, the matching
// .done events, response.completed or response.incomplete). The request side is
// server/responses_request.h.
#pragma once

#include <string>

#include "server/api_common.h"
#include "server/responses_request.h"

namespace cedar::server {

class ResponsesFormat : public StreamFormat {
 public:
  // `request`: the original Responses body (echoed fields: instructions, tools, ...); `req`: its
  // conversion (the tools' kinds and namespaces, summary and encrypted_content).
  ResponsesFormat(std::string id, std::string model, int64_t created, const ojson& request,
                  const ResponsesRequest& req);
  void event(const CompletionEvent& e, const Outcome* outcome, std::string* out) override;
  ojson body(const Outcome& o) const override;

 private:
  enum class Item { kNone, kReasoning, kMessage, kFunctionCall, kCustomCall, kLocalShell };
  ojson response(const char* status, ojson output, const Outcome* o) const;
  void emit(const char* type, ojson payload, std::string* out);
  void open_item(Item kind, ojson item, std::string* out);
  // status: "completed", or "incomplete" for the item the output limit cut short.
  void close_item(std::string* out, const char* status = "completed");
  void close_call(int64_t oi, std::string* out);
  void reasoning_delta(const std::string& text, std::string* out);
  void begin_call(const CompletionEvent& e, std::string* out);
  ojson reasoning_item(const std::string& text, const char* status) const;
  // the output item of a finished tool call, by the kind of tool it calls
  ojson call_item(const std::string& item_id, const ToolCallOut& c) const;
  const ResponsesTool* tool(const std::string& shown) const;

  std::string id_, model_;
  int64_t created_;
  ojson echo_;  // request fields echoed in the response object
  std::map<std::string, ResponsesTool> tools_;
  bool summary_ = false, encrypted_ = false;
  int64_t seq_ = 0;
  bool started_ = false;
  Item item_ = Item::kNone;
  ojson current_;                  // the open item (its text accumulated)
  ToolCallOut call_;               // the open tool call (custom and local_shell: sent when done)
  ojson output_ = ojson::array();  // finished items
};

ojson responses_usage(const Usage& u);

}  // namespace cedar::server
