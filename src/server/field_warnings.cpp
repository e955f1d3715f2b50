#include "server/field_warnings.h"

#include <mutex>
#include <set>
#include <string_view>
#include <vector>

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

// Beyond this many distinct warnings per process, new field names are no longer logged; one
// line names at most this many of a request's new field names.
constexpr size_t kMaxWarnings = 256;
constexpr size_t kNamesPerLine = 5;

std::mutex warned_mu;
std::set<std::string> warned;  // keys already warned about (guarded by warned_mu)

// Marks `key` warned; false when it was already, or when the set is full. *full is set when
// this call filled it.
bool first_warning_locked(const std::string& key, bool* full) {
  if (warned.size() > kMaxWarnings || !warned.insert(key).second) return false;
  if (warned.size() > kMaxWarnings) {
    *full = true;
    return false;
  }
  return true;
}

void warn_full(const Warn& warn) {
  warn("more than " + std::to_string(kMaxWarnings) +
       " distinct request fields were warned about; further ones are not logged");
}

// One line for the fields of one request that were not warned about before: `prefix` + their
// names (the first few) + `suffix`.
void warn_fields_once(const Warn& warn, const std::string& scope,
                      const std::vector<std::string>& names, const std::string& prefix,
                      const std::string& suffix) {
  std::vector<std::string> fresh;
  bool full = false;
  {
    std::lock_guard<std::mutex> lk(warned_mu);
    for (const std::string& n : names)
      if (first_warning_locked(scope + n, &full)) fresh.push_back(n);
  }
  if (!fresh.empty()) {
    std::string list;
    for (size_t i = 0; i < fresh.size() && i < kNamesPerLine; ++i)
      list += (i ? ", \"" : "\"") + fresh[i].substr(0, 64) + "\"";
    if (fresh.size() > kNamesPerLine)
      list += " and " + std::to_string(fresh.size() - kNamesPerLine) + " more";
    warn(prefix + list + suffix + " (warned once)");
  }
  if (full) warn_full(warn);
}

}  // namespace

void warn_once(const Warn& warn, const std::string& key, const std::string& message) {
  if (!warn) return;
  bool full = false, first = false;
  {
    std::lock_guard<std::mutex> lk(warned_mu);
    first = first_warning_locked(key, &full);
  }
  if (first) warn(message + " (warned once)");
  if (full) warn_full(warn);
}

void warn_ignored_fields(const ojson& body, RequestApi api, const Warn& warn) {
  if (!body.is_object() || !warn) return;
  const char* where = api == RequestApi::kChat        ? "chat"
                      : api == RequestApi::kResponses ? "responses"
                                                      : "messages";
  std::vector<std::string> unknown;
  for (const auto& [key, value] : body.items())
    if (!used_fields(api).count(key) && !label_fields().count(key)) unknown.push_back(key);
  warn_fields_once(warn, std::string(where) + ":", unknown, "ignoring request fields ",
                   ": cedar does not support them");
  if (api != RequestApi::kChat) return;
  std::vector<std::string> kwargs;
  if (const auto kw = body.find("chat_template_kwargs"); kw != body.end() && kw->is_object())
    for (const auto& [key, value] : kw->items())
      if (key != "thinking" && key != "enable_thinking" && key != "reasoning_effort")
        kwargs.push_back(key);
  warn_fields_once(warn, "chat_template_kwargs.", kwargs, "ignoring chat_template_kwargs ",
                   ": the V4.1 template has no such options");
}

}  // namespace cedar::server
