// An HTTP/1.1 request and its incremental parser (RFC 9112), for cedar's own front end
// (http_listener.h). The parser is fed whatever bytes have arrived and never blocks, so a client
// that sends slowly costs a buffer, not a thread. Every bound is checked before the bytes are
// kept: the head (request line + headers) size and header count, Content-Length against the body
// limit before any body byte is read, and each chunk size of a chunked body against what is left
// of the limit. Ambiguous framing (Content-Length with Transfer-Encoding, differing lengths,
// obsolete line folding) is refused rather than guessed, as request smuggling defences do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cedar::server {

struct HttpLimits {
  size_t max_head_bytes = 64 * 1024;  // request line + headers
  size_t max_headers = 128;
  size_t max_body_bytes = 16u << 20;
};

struct HttpRequest {
  std::string method;                                        // as sent (methods are case-sensitive)
  std::string path;                                          // the target without its query
  std::string query;                                         // after '?', undecoded ("" if none)
  int version_minor = 1;                                     // HTTP/1.<minor>
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;                                          // de-chunked
  std::string remote_addr;
  int fd = -1;  // the connection (for client_gone); -1 outside a server
  std::string id;  // the request id the server gave it (X-Request-Id), for its log line

  // The first value of a header (name in lower case), "" if absent.
  const std::string& header(std::string_view lower_name) const;
  bool has_header(std::string_view lower_name) const;
  // Whether the connection may carry another request after this one (HTTP/1.1 unless
  // "Connection: close"; HTTP/1.0 only with "Connection: keep-alive").
  bool keep_alive() const;
  // Whether the client closed or reset its side of the connection (a peek, never blocks).
  bool client_gone() const;
};

class RequestParser {
 public:
  explicit RequestParser(HttpLimits limits) : limits_(limits) {}

  // Consumes the start of `data` (all of what has arrived and is not yet consumed) and returns
  // how many bytes it used; bytes after a complete request are left for the next one
  // (pipelining). The head is only consumed once it is complete.
  size_t feed(std::string_view data);

  bool head_done() const { return state_ > State::kHead; }
  bool done() const { return state_ == State::kDone; }
  bool failed() const { return state_ == State::kError; }
  // After a failure: the status to answer (400, 413, 431, 501, 505) and why.
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_; }
  // The head says the client waits for "100 Continue" before it sends the body.
  bool expects_continue() const { return expect_continue_; }
  // Whether any byte of a request has been consumed (an idle keep-alive connection has none).
  bool started() const { return started_; }

  HttpRequest& request() { return req_; }
  // Ready for the next request on the same connection.
  void reset();

 private:
  enum class State {
    kHead,
    kBody,
    kChunkSize,
    kChunkData,
    kChunkDataEnd,
    kTrailers,
    kDone,
    kError
  };
  size_t fail(int status, std::string why);
  size_t parse_head(std::string_view data);
  bool parse_request_line(std::string_view line);
  bool parse_header_line(std::string_view line);
  bool frame_body();
  size_t parse_chunk_line(std::string_view data);
  size_t parse_trailers(std::string_view data);

  HttpLimits limits_;
  HttpRequest req_;
  State state_ = State::kHead;
  uint64_t remaining_ = 0;  // body bytes (or bytes of the current chunk) still to read
  size_t trailer_bytes_ = 0;
  bool expect_continue_ = false;
  bool started_ = false;
  int error_status_ = 0;
  std::string error_;
};

}  // namespace cedar::server
