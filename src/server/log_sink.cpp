#include "server/log_sink.h"

#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

namespace cedar::server {

// Shared by the sink and its writer thread, so that a writer stuck in write() after the sink is
// gone still touches live memory.
struct LogSink::State {
  FILE* out = nullptr;
  size_t max_bytes = 0;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<std::string> lines;                  // guarded by mu
  size_t queued_bytes = 0;                        // guarded by mu
  uint64_t written = 0, pushed = 0, dropped = 0;  // guarded by mu
  bool stop = false;                              // guarded by mu

  // write(2), not stdio: a writer blocked here must hold no FILE lock that exit() might want.
  void write_all(const std::string& line) const {
    const int fd = fileno(out);
    size_t done = 0;
    while (done < line.size()) {
      const ssize_t n = ::write(fd, line.data() + done, line.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;  // a closed or failed sink: the line is lost, serving goes on
      done += size_t(n);
    }
  }

  void run() {
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
      cv.wait(lk, [&] { return stop || !lines.empty(); });
      if (lines.empty()) return;  // stopping, all written
      std::string line = std::move(lines.front());
      lines.pop_front();
      lk.unlock();
      write_all(line);  // may block for as long as the reader does not read
      lk.lock();
      queued_bytes -= line.size();
      ++written;
      cv.notify_all();
    }
  }
};

LogSink::LogSink(FILE* out, size_t max_queued_bytes) : state_(std::make_shared<State>()) {
  state_->out = out;
  state_->max_bytes = max_queued_bytes;
  std::thread([s = state_] { s->run(); }).detach();
}

LogSink::~LogSink() {
  flush();
  std::lock_guard<std::mutex> lk(state_->mu);
  state_->stop = true;
  state_->cv.notify_all();
}

bool LogSink::write(std::string line) {
  std::lock_guard<std::mutex> lk(state_->mu);
  if (state_->queued_bytes + line.size() > state_->max_bytes) {
    ++state_->dropped;
    return false;
  }
  state_->queued_bytes += line.size();
  state_->lines.push_back(std::move(line));
  ++state_->pushed;
  state_->cv.notify_all();
  return true;
}

bool LogSink::flush(std::chrono::milliseconds limit) {
  std::unique_lock<std::mutex> lk(state_->mu);
  const uint64_t target = state_->pushed;
  return state_->cv.wait_for(lk, limit, [&] { return state_->written >= target; });
}

uint64_t LogSink::dropped() const {
  std::lock_guard<std::mutex> lk(state_->mu);
  return state_->dropped;
}

}  // namespace cedar::server
