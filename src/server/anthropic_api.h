// Anthropic Messages API (v41-interface.md §5.5): request conversion to a Chat Completions body
// (system, system turns among the messages, text / image / document / search_result / thinking /
// tool_use / tool_result blocks, thinking, output_config.effort and .format, tools, tool_choice,
// stop_sequences; a trailing assistant message is continued, as Anthropic prefill works), the
// message body, and the stream events message_start, content_block_start (thinking / text /
// tool_use), ping, content_block_delta (thinking_delta, text_delta, input_json_delta,
// signature_delta before a thinking block closes), content_block_stop, message_delta, message_stop.
#pragma once

#include <string>

#include "server/api_common.h"
#include "server/field_warnings.h"

namespace cedar::server {

// Anthropic body -> Chat Completions body for prepare_chat (stop_sequences -> stop, ...).
// Throws ApiError 400 naming the field; fields that cannot be honoured are passed to `warn`
// (once per process each).
ojson anthropic_to_chat(const ojson& body, const Warn& warn = {});

class AnthropicFormat : public StreamFormat {
 public:
  AnthropicFormat(std::string id, std::string model);
  void event(const CompletionEvent& e, const Outcome* outcome, std::string* out) override;
  ojson body(const Outcome& o) const override;
  ApiFlavor flavor() const override { return ApiFlavor::kAnthropic; }

 private:
  enum class Block { kNone, kThinking, kText, kToolUse };
  void open_block(Block b, ojson content_block, std::string* out);
  void close_block(std::string* out);

  std::string id_, model_;
  bool started_ = false;
  Block block_ = Block::kNone;
  int index_ = -1;  // index of the open (or last) content block
  bool pinged_ = false;
};

// stop_reason of an outcome: end_turn, stop_sequence, max_tokens, tool_use.
const char* anthropic_stop_reason(const Outcome& o);
// {"input_tokens" (not cached), "cache_read_input_tokens", "cache_creation_input_tokens",
//  "output_tokens"}.
ojson anthropic_usage(const Usage& u);

}  // namespace cedar::server
