#include "server/http_response.h"

#include <strings.h>

namespace cedar::server {

void HttpResponse::set_header(std::string name, std::string value) {
  for (auto& [k, v] : headers)
    if (strcasecmp(k.c_str(), name.c_str()) == 0) {
      v = std::move(value);
      return;
    }
  headers.emplace_back(std::move(name), std::move(value));
}

const std::string* HttpResponse::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (k.size() == name.size() && strncasecmp(k.data(), name.data(), name.size()) == 0) return &v;
  return nullptr;
}

void HttpResponse::set_content(std::string text, std::string content_type) {
  body = std::move(text);
  set_header("Content-Type", std::move(content_type));
}

void HttpResponse::set_stream(std::string content_type, std::function<bool(BodySink&)> next_piece,
                              std::function<void(bool)> on_done) {
  set_header("Content-Type", std::move(content_type));
  next = std::move(next_piece);
  done = std::move(on_done);
}

const char* reason_phrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 414:
      return "URI Too Long";
    case 417:
      return "Expectation Failed";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "";
  }
}

}  // namespace cedar::server
