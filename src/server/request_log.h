// The server's log: one line per answered request and the server's warnings, on stderr, as text
// for a terminal or as one JSON object per line (--log-format json) for a log collector. Lines
// from concurrent requests never interleave, and writing them never blocks a request: they go
// through a bounded queue (log_sink.h) that drops lines when the sink does not keep up.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "server/log_sink.h"

namespace cedar::server {

enum class LogFormat { kText, kJson };

// What one request line says. Negative times and token counts: not applicable (no generation).
struct RequestRecord {
  std::string id;  // the request id (X-Request-Id)
  std::string method, path, remote;
  std::string reason;  // an error response: why (its message)
  int status = 0;
  double seconds = -1, ttft_seconds = -1;
  int64_t prompt_tokens = -1, cached_tokens = -1, completion_tokens = -1;
  std::string finish;  // stop, length, tool_calls, cancelled, error; "" = none
};

class RequestLog {
 public:
  explicit RequestLog(LogFormat format = LogFormat::kText, FILE* out = stderr)
      : format_(format), sink_(out) {}
  void request(const RequestRecord& r);
  void warn(const std::string& message);
  void info(const std::string& message);
  LogFormat format() const { return format_; }
  // Waits (at most a second) for the lines logged so far to reach the FILE.
  bool flush() { return sink_.flush(); }
  // Lines dropped because the sink did not keep up.
  uint64_t dropped() const { return sink_.dropped(); }

 private:
  void line(const char* level, const std::string& message);
  LogFormat format_;
  LogSink sink_;
};

// "text" or "json"; throws std::runtime_error naming the value otherwise.
LogFormat parse_log_format(const std::string& s);

}  // namespace cedar::server
