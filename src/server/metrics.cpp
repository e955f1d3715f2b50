#include "server/metrics.h"

#include <cstdio>
#include <utility>

namespace cedar::server {

void Metrics::request_done(const std::string& endpoint, int status) {
  std::lock_guard<std::mutex> lk(mu_);
  requests_[{endpoint, status}]++;
}

void Metrics::add_prompt(int64_t prompt_tokens, int64_t cached_tokens) {
  prompt_tokens_ += prompt_tokens;
  cached_tokens_ += cached_tokens;
}

void Metrics::add_completion_tokens(int64_t n) {
  completion_tokens_ += n;
  const auto now = Clock::now();
  std::lock_guard<std::mutex> lk(mu_);
  recent_.emplace_back(now, n);
  // Keep a minute of history at most.
  while (!recent_.empty() && now - recent_.front().first > std::chrono::seconds(60))
    recent_.pop_front();
}

double Metrics::decode_rate(double window_seconds) const {
  const auto now = Clock::now();
  const auto from = now - std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(window_seconds));
  std::lock_guard<std::mutex> lk(mu_);
  int64_t n = 0;
  for (const auto& [t, k] : recent_)
    if (t >= from) n += k;
  return double(n) / window_seconds;
}

void Histogram::observe(double seconds) {
  int b = 0;
  while (b < kBuckets && seconds > kBounds[b]) ++b;
  std::lock_guard<std::mutex> lk(mu_);
  counts_[b]++;
  sum_ += seconds;
  n_++;
}

std::string Histogram::prometheus(const char* name, const char* help) const {
  std::lock_guard<std::mutex> lk(mu_);
  std::string s = std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " histogram\n";
  char line[256];
  int64_t cum = 0;
  for (int b = 0; b <= kBuckets; ++b) {
    cum += counts_[b];
    if (b < kBuckets)
      std::snprintf(line, sizeof line, "%s_bucket{le=\"%g\"} %lld\n", name, kBounds[b],
                    static_cast<long long>(cum));
    else
      std::snprintf(line, sizeof line, "%s_bucket{le=\"+Inf\"} %lld\n", name,
                    static_cast<long long>(cum));
    s += line;
  }
  std::snprintf(line, sizeof line, "%s_sum %.6f\n%s_count %lld\n", name, sum_, name,
                static_cast<long long>(n_));
  return s + line;
}

// The image pool (server/image_pool.h): pixels are counted exactly, so the gauges print whole.
std::string Metrics::images_prometheus() const {
  ImageStats m;
  {
    std::lock_guard<std::mutex> lk(mu_);
    m = images_;
  }
  std::string s;
  char line[512];
  auto value = [&](const char* type, const char* name, const char* help, int64_t v) {
    std::snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s %s\n%s %lld\n", name, help, name,
                  type, name, static_cast<long long>(v));
    s += line;
  };
  value("gauge", "cedar_image_pixels_in_flight",
        "Image memory in use, in RGB pixels: images decoding and patches waiting for the tower.",
        m.pixels_in_flight);
  value("gauge", "cedar_image_pixels_waiting",
        "Image memory that requests wait for, in RGB pixels.", m.pixels_waiting);
  value("gauge", "cedar_image_pixel_budget", "The image memory budget, in RGB pixels.",
        m.pixel_budget);
  value("counter", "cedar_image_requests_refused_total",
        "Requests answered 503 because the image budget stayed spent.", m.refused);
  s += "# HELP cedar_image_work_stopped_total Image decodes (or waits for the budget) stopped "
       "early, by reason.\n# TYPE cedar_image_work_stopped_total counter\n";
  const std::pair<const char*, int64_t> stopped[] = {{"client_gone", m.stopped_client},
                                                     {"deadline", m.stopped_deadline},
                                                     {"shutdown", m.stopped_shutdown}};
  for (const auto& [reason, n] : stopped) {
    std::snprintf(line, sizeof line, "cedar_image_work_stopped_total{reason=\"%s\"} %lld\n", reason,
                  static_cast<long long>(n));
    s += line;
  }
  return s;
}

std::string Metrics::prometheus() const {
  std::string s;
  char line[512];
  s += "# HELP cedar_requests_total HTTP requests answered, by endpoint and status.\n";
  s += "# TYPE cedar_requests_total counter\n";
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (const auto& [key, n] : requests_) {
      std::snprintf(line, sizeof line, "cedar_requests_total{endpoint=\"%s\",status=\"%d\"} %lld\n",
                    key.first.c_str(), key.second, static_cast<long long>(n));
      s += line;
    }
  }
  auto counter = [&](const char* name, const char* help, int64_t v) {
    std::snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s counter\n%s %lld\n", name, help, name,
                  name, static_cast<long long>(v));
    s += line;
  };
  auto gauge = [&](const char* name, const char* help, double v) {
    std::snprintf(line, sizeof line, "# HELP %s %s\n# TYPE %s gauge\n%s %.6g\n", name, help, name,
                  name, v);
    s += line;
  };
  counter("cedar_prompt_tokens_total", "Prompt tokens of admitted requests.", prompt_tokens_);
  counter("cedar_prompt_cache_hit_tokens_total",
          "Prompt tokens reused from the prefix cache or a slot's session state.", cached_tokens_);
  counter("cedar_prompt_cache_miss_tokens_total", "Prompt tokens computed.",
          prompt_tokens_ - cached_tokens_);
  counter("cedar_completion_tokens_total", "Generated tokens.", completion_tokens_);
  counter("cedar_requests_cancelled_total", "Generations cancelled by a client disconnect.",
          cancelled_);
  counter("cedar_spec_drafted_tokens_total",
          "Tokens the DSpark drafter proposed into verify passes (speculative decoding).",
          drafted_);
  counter("cedar_spec_accepted_tokens_total", "Drafted tokens the verify passes kept.", accepted_);
  counter("cedar_spec_verify_passes_total", "Speculative verify passes.", verify_passes_);
  counter("cedar_log_lines_dropped_total",
          "Log lines dropped because stderr did not take them in time (a stalled reader).",
          int64_t(log_dropped_));
  gauge("cedar_requests_queued", "Requests waiting for a slot.", queued_);
  gauge("cedar_requests_active", "Requests being generated.", active_);
  gauge("cedar_kv_reserved_bytes",
        "KV bytes reserved by admitted requests and held by idle slot sessions.", double(kv_used_));
  gauge("cedar_kv_pool_bytes", "The KV pool shared by the slots (--kv-ram; 0: none).",
        double(kv_capacity_));
  runtime::BatcherStats b;
  {
    std::lock_guard<std::mutex> lk(mu_);
    b = batch_;
  }
  counter("cedar_forward_passes_total", "Batched forward passes run.", int64_t(b.passes));
  counter("cedar_forward_calls_total",
          "Forward calls (decode steps, prefill chunks) served by those passes.", int64_t(b.calls));
  counter("cedar_forward_rows_total", "Token rows computed by those passes.", int64_t(b.rows));
  gauge("cedar_forward_pass_max_calls", "The most forward calls one pass has served.",
        double(b.max_calls));
  gauge("cedar_decode_tokens_per_second", "Generated tokens per second over the last 10 s.",
        decode_rate(10.0));
  s += images_prometheus();
  s += latency_.prometheus("cedar_request_duration_seconds",
                           "Generation requests from arrival to their last token.");
  s += ttft_.prometheus("cedar_time_to_first_token_seconds",
                        "Generation requests from arrival to their first answer token.");
  return s;
}

}  // namespace cedar::server
