// Where the server's log lines go: a bounded queue in front of a FILE that one writer thread
// drains. A stderr nobody reads (a pipe whose reader stalled, a full disk behind a redirect)
// blocks only that thread; serving threads never wait for the log. When the queue is full a
// line is dropped and counted (cedar_log_lines_dropped_total in /metrics).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

namespace cedar::server {

class LogSink {
 public:
  explicit LogSink(FILE* out, size_t max_queued_bytes = 256u << 10);
  // Waits up to a second for the queued lines to be written, then leaves the writer behind
  // (it owns what it needs): a blocked sink never holds up shutdown.
  ~LogSink();
  LogSink(const LogSink&) = delete;
  LogSink& operator=(const LogSink&) = delete;

  // Queues one line (with its newline); false (and counted) when the queue is full.
  bool write(std::string line);
  // Waits until everything queued so far is written or `limit` passes; true when written.
  bool flush(std::chrono::milliseconds limit = std::chrono::seconds(1));
  uint64_t dropped() const;

 private:
  struct State;
  std::shared_ptr<State> state_;
};

}  // namespace cedar::server
