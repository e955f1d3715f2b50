// The server's log: one line per answered request and the server's warnings, on stderr, as text
// for a terminal or as one JSON object per line (--log-format json) for a log collector. Lines
// from concurrent requests never interleave.
#pragma once

#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>

namespace cedar::server {

enum class LogFormat { kText, kJson };

// What one request line says. Negative times and token counts: not applicable (no generation).
struct RequestRecord {
  std::string method, path, remote;
  int status = 0;
  double seconds = -1, ttft_seconds = -1;
  int64_t prompt_tokens = -1, cached_tokens = -1, completion_tokens = -1;
  std::string finish;  // stop, length, tool_calls, cancelled, error; "" = none
};

class RequestLog {
 public:
  explicit RequestLog(LogFormat format = LogFormat::kText, FILE* out = stderr)
      : format_(format), out_(out) {}
  void request(const RequestRecord& r);
  void warn(const std::string& message);
  LogFormat format() const { return format_; }

 private:
  void write(const std::string& line);
  LogFormat format_;
  FILE* out_;
  std::mutex mu_;
};

// "text" or "json"; throws std::runtime_error naming the value otherwise.
LogFormat parse_log_format(const std::string& s);

}  // namespace cedar::server
