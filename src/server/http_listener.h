// HttpListener: cedar's HTTP/1.1 front end. One event-loop thread (epoll) accepts connections and
// reads every request whole -- head and body, under per-connection deadlines -- before any worker
// sees it; only complete requests reach the worker pools. So slow, idle or half-sent connections
// cost a socket and a buffer, never a thread: they cannot starve /health or generation, and a
// header that trickles in is cut off at the head deadline however regularly its bytes come
// (a per-read timeout, which is all cpp-httplib 0.11 has, never fires on such a client).
//
// Two pools run handlers: `light` for quick routes (health, metrics, models, the chat page),
// `heavy` for generations, which hold their thread while tokens stream. Errors found while
// reading (malformed, too large, too slow) are answered from the loop and the connection is
// closed after a short drain, so the client reads the answer instead of a reset.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "server/http_request.h"
#include "server/http_response.h"

namespace cedar::server {

class TaskPool;

struct ListenerOptions {
  HttpLimits limits;
  int heavy_threads = 256;
  int light_threads = 4;
  int max_connections = 4096;  // open sockets, idle and busy; more are answered 503 and closed
  int max_requests_per_connection = 1000;
  std::chrono::milliseconds head_timeout{10000};  // first byte of a request to the end of its head
  std::chrono::milliseconds body_idle_timeout{10000};  // no body byte for this long
  std::chrono::milliseconds body_timeout{120000};      // end of the head to the end of the body
  std::chrono::milliseconds idle_timeout{10000};       // keep-alive connection with no request
  std::chrono::milliseconds write_timeout{30000};      // a response write that makes no progress
};

class HttpListener {
 public:
  using Handler = std::function<void(HttpRequest&, HttpResponse&)>;
  // Whether a complete request goes to the heavy pool (read on the loop thread: keep it cheap).
  using Classifier = std::function<bool(const HttpRequest&)>;
  // The answer to a request refused while it was read (the request holds what was parsed).
  using ErrorHandler =
      std::function<void(const HttpRequest&, int status, const std::string& why, HttpResponse&)>;

  HttpListener(ListenerOptions opt, Handler handler, Classifier heavy, ErrorHandler on_error);
  ~HttpListener();

  // Binds host:port (port 0: any free port) and listens. Returns the port; throws
  // std::runtime_error (a port in use is an error: SO_REUSEADDR, never SO_REUSEPORT).
  int bind(const std::string& host, int port);
  // Serves until stop(). Returns false if the event loop could not run.
  bool run();
  void stop();  // any thread, any time; idempotent

 private:
  struct Conn;
  using ConnPtr = std::shared_ptr<Conn>;
  bool loop(int ep);
  bool accept_all(int ep);
  void on_readable(int ep, const ConnPtr& c);
  bool advance(int ep, const ConnPtr& c);
  void refuse(int ep, const ConnPtr& c, int status, const std::string& why);
  void dispatch(int ep, const ConnPtr& c);
  void serve(const ConnPtr& c);
  bool write_response(const ConnPtr& c, const HttpRequest& req, HttpResponse& res, bool keep);
  void take_back(int ep);
  void sweep(int ep);
  void close_conn(int ep, const ConnPtr& c);
  enum class After { kKeep, kDrain, kClose };
  void release(const ConnPtr& c, After after);

  ListenerOptions opt_;
  Handler handler_;
  Classifier heavy_;
  ErrorHandler on_error_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: stop() and connections coming back from workers
  std::atomic<bool> stopping_{false};
  std::unordered_map<int, ConnPtr> conns_;  // loop thread only: connections being read
  std::mutex mu_;                           // guards busy_ and returned_
  std::unordered_set<int> busy_;            // fds a worker holds
  std::vector<ConnPtr> returned_;           // keep-alive connections back from workers
  std::unique_ptr<TaskPool> light_, heavy_pool_;
};

}  // namespace cedar::server
