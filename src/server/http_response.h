// An HTTP response as a route handler builds it for cedar's front end (http_listener.h): a status,
// headers and either a whole body or a body produced piece by piece (SSE, keep-alive padded
// JSON), which the listener sends with chunked transfer encoding. Framing headers
// (Content-Length, Transfer-Encoding, Connection) are the listener's, never the handler's.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cedar::server {

// Where a streamed body goes. write() returns false once the client is gone.
class BodySink {
 public:
  virtual ~BodySink() = default;
  virtual bool write(std::string_view data) = 0;
  // The body is complete (the terminating chunk is sent after the producer returns).
  void finish() { finished_ = true; }
  bool finished() const { return finished_; }

 private:
  bool finished_ = false;
};

struct HttpResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  bool close = false;  // close the connection after this response
  // Streamed body: `next` is called until the sink is finished or it returns false (give up:
  // the connection is closed); `done` is called once after, with whether the body completed.
  std::function<bool(BodySink&)> next;
  std::function<void(bool completed)> done;
  bool self_logged = false;  // the handler logs this request itself (when its body ends)
  std::string log_reason;    // an error response: what the request log says went wrong

  void set_header(std::string name, std::string value);
  const std::string* header(std::string_view name) const;  // case-insensitive
  void set_content(std::string text, std::string content_type);
  void set_stream(std::string content_type, std::function<bool(BodySink&)> next_piece,
                  std::function<void(bool)> on_done);
};

// "OK", "Not Found", ... ("" for a status without a standard phrase).
const char* reason_phrase(int status);

}  // namespace cedar::server
