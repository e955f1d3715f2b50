// Server counters, exported as Prometheus text on GET /metrics: requests by status, tokens
// (prompt, cached, computed, completion), cancellations, queue and active gauges, and the
// aggregate decode rate over a sliding window, the continuous-batching counters (passes,
// calls and rows per pass), and the image pool's pixel budget and refusals.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>

#include "runtime/batcher.h"
#include "server/image_pool.h"

namespace cedar::server {

// A Prometheus histogram of seconds with fixed buckets (0.05 s .. 600 s).
class Histogram {
 public:
  void observe(double seconds);
  // the _bucket, _sum and _count lines of `name`, with HELP and TYPE
  std::string prometheus(const char* name, const char* help) const;

 private:
  static constexpr double kBounds[] = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600};
  static constexpr int kBuckets = int(sizeof(kBounds) / sizeof(kBounds[0]));
  mutable std::mutex mu_;
  int64_t counts_[kBuckets + 1] = {};  // the last one: above every bound
  double sum_ = 0;
  int64_t n_ = 0;
};

class Metrics {
 public:
  // A finished generation request: its latency and, when it produced any, its time to the
  // first token.
  void observe_generation(double seconds, double ttft_seconds) {
    latency_.observe(seconds);
    if (ttft_seconds >= 0) ttft_.observe(ttft_seconds);
  }
  void request_done(const std::string& endpoint, int status);
  void add_prompt(int64_t prompt_tokens, int64_t cached_tokens);
  void add_completion_tokens(int64_t n);  // also feeds the decode-rate window
  void add_cancelled() { cancelled_++; }
  // speculative decoding: tokens drafted into verify passes, and those kept
  void add_speculative(int64_t drafted, int64_t accepted, int64_t passes) {
    drafted_ += drafted;
    accepted_ += accepted;
    verify_passes_ += passes;
  }
  void set_queue(int queued, int active) {
    queued_ = queued;
    active_ = active;
  }
  // the scheduler's KV pool: bytes reserved by requests and idle sessions, capacity (0: none)
  void set_kv(int64_t used, int64_t capacity) {
    kv_used_ = used;
    kv_capacity_ = capacity;
  }

  // Log lines dropped so far (server/log_sink.h), as of now.
  void set_log_dropped(uint64_t n) { log_dropped_ = n; }
  // The batcher's counters, as of now (set before prometheus()).
  void set_batch(const runtime::BatcherStats& b) {
    std::lock_guard<std::mutex> lk(mu_);
    batch_ = b;
  }

  // The image pool's budget and counters, as of now (set before prometheus()).
  void set_images(const ImageStats& s) {
    std::lock_guard<std::mutex> lk(mu_);
    images_ = s;
  }

  // Completion tokens per second over the last `window` seconds.
  double decode_rate(double window_seconds = 10.0) const;
  std::string prometheus() const;

  int64_t completion_tokens() const { return completion_tokens_; }
  int64_t cached_tokens() const { return cached_tokens_; }

 private:
  std::string images_prometheus() const;

  using Clock = std::chrono::steady_clock;
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, int64_t> requests_;   // (endpoint, status) -> count
  std::deque<std::pair<Clock::time_point, int64_t>> recent_;  // (time, tokens) for the rate
  std::atomic<int64_t> prompt_tokens_{0}, cached_tokens_{0}, completion_tokens_{0};
  std::atomic<int64_t> cancelled_{0};
  std::atomic<int64_t> drafted_{0}, accepted_{0}, verify_passes_{0};
  std::atomic<int> queued_{0}, active_{0};
  std::atomic<int64_t> kv_used_{0}, kv_capacity_{0};
  std::atomic<uint64_t> log_dropped_{0};
  runtime::BatcherStats batch_;  // guarded by mu_
  ImageStats images_;            // guarded by mu_
  Histogram latency_, ttft_;
};

}  // namespace cedar::server
