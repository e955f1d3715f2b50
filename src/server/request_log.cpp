#include "server/request_log.h"

#include <chrono>
#include <ctime>
#include <stdexcept>

#include "text/dsml.h"

namespace cedar::server {

namespace {

// UTC, millisecond resolution: 2026-12-02T03:04:05.678Z
std::string timestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const int ms = int(
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[80];  // room for any int the format could print (the compiler checks)
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
  return buf;
}

std::string fixed3(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  return buf;
}

// A request path as logged: a client may send 64 KB of it, the log line keeps the first 512 bytes.
std::string logged_path(const std::string& path) {
  constexpr size_t kMax = 512;
  return path.size() <= kMax ? path : path.substr(0, kMax) + "...";
}

// An error message as logged: one line, at most 300 bytes.
std::string logged_reason(const std::string& why) {
  constexpr size_t kMax = 300;
  std::string s = why.size() <= kMax ? why : why.substr(0, kMax) + "...";
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

}  // namespace

LogFormat parse_log_format(const std::string& s) {
  if (s == "text") return LogFormat::kText;
  if (s == "json") return LogFormat::kJson;
  throw std::runtime_error("--log-format must be text or json, got '" + s + "'");
}

void RequestLog::request(const RequestRecord& r) {
  if (format_ == LogFormat::kJson) {
    text::ojson j = {{"time", timestamp()}, {"level", "info"},    {"event", "request"},
                     {"request_id", r.id},  {"method", r.method}, {"path", logged_path(r.path)},
                     {"status", r.status},  {"remote", r.remote}};
    if (!r.reason.empty()) j["error"] = logged_reason(r.reason);
    if (r.seconds >= 0) j["seconds"] = r.seconds;
    if (r.ttft_seconds >= 0) j["ttft_seconds"] = r.ttft_seconds;
    if (r.prompt_tokens >= 0) j["prompt_tokens"] = r.prompt_tokens;
    if (r.cached_tokens >= 0) j["cached_tokens"] = r.cached_tokens;
    if (r.completion_tokens >= 0) j["completion_tokens"] = r.completion_tokens;
    if (!r.finish.empty()) j["finish"] = r.finish;
    sink_.write(j.dump(-1, ' ', false, text::ojson::error_handler_t::replace) + "\n");
    return;
  }
  std::string s = timestamp() + (r.id.empty() ? "" : " " + r.id) + " " + r.method + " " +
                  logged_path(r.path) + " " + std::to_string(r.status);
  if (r.seconds >= 0) s += " " + fixed3(r.seconds) + "s";
  if (r.ttft_seconds >= 0) s += " ttft " + fixed3(r.ttft_seconds) + "s";
  if (r.prompt_tokens >= 0) {
    s += " prompt " + std::to_string(r.prompt_tokens);
    if (r.cached_tokens > 0) s += " (cached " + std::to_string(r.cached_tokens) + ")";
  }
  if (r.completion_tokens >= 0) s += " completion " + std::to_string(r.completion_tokens);
  if (!r.finish.empty()) s += " " + r.finish;
  if (!r.remote.empty()) s += " from " + r.remote;
  if (!r.reason.empty()) s += ": " + logged_reason(r.reason);
  sink_.write(s + "\n");
}

void RequestLog::line(const char* level, const std::string& message) {
  if (format_ == LogFormat::kJson) {
    const text::ojson j = {{"time", timestamp()}, {"level", level}, {"message", message}};
    sink_.write(j.dump(-1, ' ', false, text::ojson::error_handler_t::replace) + "\n");
  } else {
    sink_.write(timestamp() + " " + level + ": " + message + "\n");
  }
}

void RequestLog::warn(const std::string& message) { line("warning", message); }
void RequestLog::info(const std::string& message) { line("info", message); }

}  // namespace cedar::server
