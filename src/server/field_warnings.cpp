#include "server/field_warnings.h"

#include <mutex>
#include <set>
#include <string_view>

namespace cedar::server {

namespace {

using Names = std::set<std::string_view>;

// Top-level fields each API's conversion reads (request_options.cpp, chat_request.cpp,
// api_common.cpp, anthropic_api.cpp, responses_api.cpp).
const Names& used_fields(RequestApi api) {
  static const Names chat = {"model",
                             "messages",
                             "temperature",
                             "top_p",
                             "top_k",
                             "min_p",
                             "frequency_penalty",
                             "presence_penalty",
                             "seed",
                             "max_tokens",
                             "max_completion_tokens",
                             "logprobs",
                             "top_logprobs",
                             "n",
                             "stop",
                             "stream",
                             "stream_options",
                             "tools",
                             "tool_choice",
                             "response_format",
                             "thinking",
                             "reasoning_effort",
                             "cedar_test_output",
                             "chat_template_kwargs"};
  static const Names responses = {"model",
                                  "input",
                                  "instructions",
                                  "stream",
                                  "temperature",
                                  "top_p",
                                  "max_output_tokens",
                                  "reasoning",
                                  "text",
                                  "tools",
                                  "tool_choice",
                                  "include",
                                  "previous_response_id",
                                  "conversation",
                                  "cedar_test_output"};
  static const Names anthropic = {"model",          "messages",
                                  "system",         "max_tokens",
                                  "stop_sequences", "stream",
                                  "temperature",    "top_p",
                                  "top_k",          "tools",
                                  "tool_choice",    "thinking",
                                  "output_config",  "cedar_test_output"};
  switch (api) {
    case RequestApi::kChat:
      return chat;
    case RequestApi::kResponses:
      return responses;
    case RequestApi::kAnthropic:
      break;
  }
  return anthropic;
}

// Fields that label a request or tune the other server's storage and routing; they do not change
// the answer.
const Names& label_fields() {
  static const Names s = {"user",
                          "metadata",
                          "store",
                          "service_tier",
                          "prompt_cache_key",
                          "prompt_cache_retention",
                          "safety_identifier",
                          "parallel_tool_calls",
                          "client_metadata",
                          "truncation",
                          "stream_options"};
  return s;
}

// Beyond this many distinct warnings per process, new field names are no longer logged.
constexpr size_t kMaxWarnings = 256;

}  // namespace

void warn_once(const Warn& warn, const std::string& key, const std::string& message) {
  if (!warn) return;
  static std::mutex mu;
  static std::set<std::string> warned;
  bool last = false;
  {
    std::lock_guard<std::mutex> lk(mu);
    if (warned.size() > kMaxWarnings || !warned.insert(key).second) return;
    last = warned.size() > kMaxWarnings;
  }
  if (last)
    warn("more than " + std::to_string(kMaxWarnings) +
         " distinct request fields were warned about; further ones are not logged");
  else
    warn(message + " (warned once)");
}

void warn_ignored_fields(const ojson& body, RequestApi api, const Warn& warn) {
  if (!body.is_object() || !warn) return;
  const char* where = api == RequestApi::kChat        ? "chat"
                      : api == RequestApi::kResponses ? "responses"
                                                      : "messages";
  for (const auto& [key, value] : body.items()) {
    if (used_fields(api).count(key) || label_fields().count(key)) continue;
    warn_once(warn, std::string(where) + ":" + key,
              "ignoring request field \"" + key + "\": cedar does not support it");
  }
  if (api != RequestApi::kChat) return;
  if (const auto kw = body.find("chat_template_kwargs"); kw != body.end() && kw->is_object())
    for (const auto& [key, value] : kw->items())
      if (key != "thinking" && key != "enable_thinking" && key != "reasoning_effort")
        warn_once(
            warn, "chat_template_kwargs." + key,
            "ignoring chat_template_kwargs." + key + ": the V4.1 template has no such option");
}

}  // namespace cedar::server
