// The HTTP front door of `cedar serve` (cpp-httplib): routes (v41-interface.md §5.1), optional
// API key, body size limit, JSON error bodies in the flavour of the API that was called (§5.8),
// and the streaming plumbing that connects a scheduler Job to an SSE (or keep-alive padded JSON)
// response, cancelling the job when the client goes away.
#pragma once

#include <memory>
#include <string>

#include "server/api_common.h"

namespace httplib {
class Server;
}

namespace cedar::server {

class HttpServer {
 public:
  HttpServer(runtime::Engine& engine, Scheduler& scheduler, Metrics& metrics, ServerConfig cfg,
             int http_threads);
  ~HttpServer();

  // Binds host:port (port 0: any free port). Returns the port; throws std::runtime_error.
  int bind(const std::string& host, int port);
  // Serves until stop(). Returns false if the listener failed.
  bool listen();
  void stop();

 private:
  enum class Endpoint { kChat, kCompletion, kResponses, kAnthropic };
  void routes();

  runtime::Engine& engine_;
  Scheduler& scheduler_;
  Metrics& metrics_;
  ServerConfig cfg_;
  ApiContext ctx_;
  std::unique_ptr<httplib::Server> http_;
};

}  // namespace cedar::server
