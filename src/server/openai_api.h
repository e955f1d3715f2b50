// OpenAI wire formats (v41-interface.md §5.3, §5.4): Chat Completions (chat.completion /
// chat.completion.chunk with reasoning_content, incremental tool-call arguments, finish_reason,
// usage with the cache hit/miss fields), legacy/FIM Completions (text_completion), and the model
// list.
#pragma once

#include <string>

#include "server/api_common.h"

namespace cedar::server {

class ChatCompletionFormat : public StreamFormat {
 public:
  // `thinking`: the request generates reasoning first (the first delta carries
  // reasoning_content: "" and answer deltas carry reasoning_content: null).
  // `logprobs`: the request asked for them (choice.logprobs = {content, refusal}; a streamed
  // chunk carries the entries of the tokens whose text it holds).
  ChatCompletionFormat(std::string id, std::string model, int64_t created, bool thinking,
                       bool include_usage, bool logprobs = false);
  void event(const CompletionEvent& e, const Outcome* outcome, std::string* out) override;
  ojson body(const Outcome& o) const override;

 private:
  ojson chunk(ojson delta, const char* finish_reason) const;
  void open(std::string* out);
  // moves the pending logprob entries into chunk c's choice (when requested and any)
  void attach_pending(ojson& c);

  std::string id_, model_;
  int64_t created_;
  bool thinking_, include_usage_, logprobs_;
  bool opened_ = false;
  ojson pending_ = ojson::array();  // logprob entries not yet sent
};

// OpenAI's logprobs.content entry of one token.
ojson openai_logprob(const LogprobOut& lp);

class CompletionFormat : public StreamFormat {
 public:
  // `logprobs`: the legacy choice.logprobs {tokens, token_logprobs, top_logprobs, text_offset}.
  CompletionFormat(std::string id, std::string model, int64_t created, bool include_usage,
                   bool logprobs = false);
  void event(const CompletionEvent& e, const Outcome* outcome, std::string* out) override;
  ojson body(const Outcome& o) const override;

 private:
  ojson chunk(const std::string& text, const char* finish_reason) const;
  void attach_pending(ojson& c);  // as ChatCompletionFormat's, in the legacy shape
  // the legacy logprobs object of entries, text offsets counted from *offset (advanced)
  static ojson legacy_logprobs(const std::vector<LogprobOut>& lps, int64_t* offset);
  std::string id_, model_;
  int64_t created_;
  bool include_usage_, logprobs_;
  std::vector<LogprobOut> pending_;
  int64_t offset_ = 0;
};

// GET /v1/models: {"object":"list","data":[{"id","object":"model","created","owned_by"}]}.
ojson models_body(const std::string& model_name, int64_t ctx_size, int64_t ctx_train);

// The chat.completion message for an outcome: role, content (null when empty with tool calls),
// reasoning_content (thinking only), tool_calls.
ojson openai_message(const Outcome& o);

// A streamed error frame: data: {"error": {...}} (the OpenAI SDK raises it as an APIError).
std::string openai_stream_error(const std::string& message);

}  // namespace cedar::server
