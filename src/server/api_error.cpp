#include "server/api_error.h"

namespace cedar::server {

ApiError::ApiError(int status, const std::string& message, std::string param, std::string type)
    : std::runtime_error(message),
      status_(status),
      param_(std::move(param)),
      type_(type.empty() ? error_type_for_status(status) : std::move(type)) {}

ApiError ApiError::from(const text::RequestError& e) {
  return ApiError(e.status(), e.what(), e.param());
}

std::string error_type_for_status(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 402:
      return "insufficient_balance";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 405:
      return "invalid_request_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
      return "overloaded_error";
    default:
      return status >= 500 ? "internal_error" : "invalid_request_error";
  }
}

ojson openai_error_body(const ApiError& e) {
  ojson err = ojson::object();
  err["message"] = e.what();
  err["type"] = e.type();
  err["param"] = e.param().empty() ? ojson() : ojson(e.param());
  err["code"] = e.type();
  return ojson{{"error", err}};
}

ojson anthropic_error_body(const ApiError& e) {
  // Anthropic calls the 5xx type "api_error".
  std::string type = e.type() == "internal_error" ? "api_error" : e.type();
  ojson err = ojson::object();
  err["type"] = type;
  err["message"] = e.what();
  ojson body = ojson::object();
  body["type"] = "error";
  body["error"] = err;
  return body;
}

ojson error_body(const ApiError& e, ApiFlavor flavor) {
  return flavor == ApiFlavor::kAnthropic ? anthropic_error_body(e) : openai_error_body(e);
}

}  // namespace cedar::server
