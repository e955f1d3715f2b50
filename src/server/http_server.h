// The HTTP front door of `cedar serve` (on http_listener.h): routes (v41-interface.md §5.1),
// optional API key, body size limit, JSON error bodies in the flavour of the API that was called
// (§5.8), and the streaming plumbing that connects a scheduler Job to an SSE (or keep-alive padded
// JSON) response, cancelling the job when the client goes away.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/api_common.h"
#include "server/http_listener.h"
#include "server/origin_policy.h"
#include "server/request_log.h"

namespace cedar::server {

enum class ApiEndpoint { kChat, kCompletion, kResponses, kAnthropic };

class HttpServer {
 public:
  // The server answers from bind() on: while the model loads, /health is 503 {"status":
  // "loading"} and every other route a 503 that says so, until attach() hands it the engine.
  HttpServer(Metrics& metrics, ServerConfig cfg, int http_threads);
  ~HttpServer();

  // Binds host:port (port 0: any free port). Returns the port; throws std::runtime_error.
  int bind(const std::string& host, int port);
  // The loaded model: from now on every route is served. Call once.
  void attach(runtime::Engine& engine, Scheduler& scheduler, bool prefix_cache);
  // Serves until stop(). Returns false if the listener failed.
  bool listen();
  void stop();
  // A line in the server's log (never blocks: log_sink.h).
  void log_info(const std::string& message) { log_.info(message); }
  void log_warn(const std::string& message) { log_.warn(message); }

 private:
  using Handler = std::function<void(const HttpRequest&, HttpResponse&)>;
  struct Route {
    std::string method;
    Handler handler;
    bool heavy = false;  // a generation: runs on the heavy pool
  };
  void routes();
  void add(const std::string& method, const std::string& path, Handler h, bool heavy = false);
  void handle(HttpRequest& req, HttpResponse& res);
  bool gate(const HttpRequest& req, HttpResponse& res);
  void generate(ApiEndpoint ep, const HttpRequest& req, HttpResponse& res);
  void count_tokens(const HttpRequest& req, HttpResponse& res);
  void refused(const HttpRequest& req, int status, const std::string& why, HttpResponse& res);
  runtime::Engine& engine() const { return ctx_->engine; }
  Scheduler& scheduler() const { return ctx_->scheduler; }

  Metrics& metrics_;
  ServerConfig cfg_;
  std::unique_ptr<ImagePool> images_;  // from cfg_.images; outlives the listener's threads
  OriginPolicy policy_;                // the browser and network boundary (origin_policy.h)
  std::optional<ApiContext> ctx_;      // set by attach()
  std::atomic<bool> ready_{false};
  RequestLog log_;
  std::map<std::string, std::vector<Route>> routes_;  // by path; fixed before bind()
  std::unique_ptr<HttpListener> http_;
};

}  // namespace cedar::server
