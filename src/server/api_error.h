// Errors the HTTP API returns to clients (v41-interface.md §5.8): a status, a message that says
// what is wrong, and the body shape of the API that was called (OpenAI or Anthropic).
#pragma once

#include <stdexcept>
#include <string>

#include "text/chat_request.h"
#include "text/dsml.h"

namespace cedar::server {

using text::ojson;

enum class ApiFlavor { kOpenAI, kAnthropic };

class ApiError : public std::runtime_error {
 public:
  // `type` empty: derived from the status (400 invalid_request_error, 401 authentication_error,
  // 404 not_found_error, 413 request_too_large, 429 rate_limit_error, 500 internal_error,
  // 503 overloaded_error ...).
  ApiError(int status, const std::string& message, std::string param = {}, std::string type = {});
  int status() const { return status_; }
  const std::string& param() const { return param_; }
  const std::string& type() const { return type_; }

  // A text-layer RequestError keeps its status and param.
  static ApiError from(const text::RequestError& e);

 private:
  int status_;
  std::string param_;
  std::string type_;
};

// The default error type for an HTTP status.
std::string error_type_for_status(int status);

// {"error":{"message","type","param","code"}} (code = type, as DeepSeek's API does).
ojson openai_error_body(const ApiError& e);
// {"type":"error","error":{"type","message"}} (Anthropic Messages API).
ojson anthropic_error_body(const ApiError& e);
ojson error_body(const ApiError& e, ApiFlavor flavor);

}  // namespace cedar::server
