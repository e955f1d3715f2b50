#include "server/http_listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "server/task_pool.h"

namespace cedar::server {

namespace {

using Clock = std::chrono::steady_clock;

constexpr auto kDrainTime = std::chrono::milliseconds(2000);
constexpr auto kTick = std::chrono::milliseconds(100);
constexpr size_t kReadChunk = 64 * 1024;

std::string peer_name(const sockaddr_storage& ss) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (ss.ss_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(ss).sin_addr, host, sizeof(host));
  else if (ss.ss_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(ss).sin6_addr, host, sizeof(host));
  return host;
}

// Writes all of `data` to a non-blocking socket; false once the peer is gone or no byte could be
// written for `timeout`.
bool send_all(int fd, std::string_view data, std::chrono::milliseconds timeout) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(size_t(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      const int r = ::poll(&p, 1, int(timeout.count()));
      if (r <= 0 || (p.revents & (POLLERR | POLLHUP | POLLNVAL))) return false;
      continue;
    }
    return false;
  }
  return true;
}

std::string head_of(const HttpResponse& res, bool chunked, bool keep, size_t length) {
  std::string h = "HTTP/1.1 " + std::to_string(res.status) + " " + reason_phrase(res.status);
  h += "\r\n";
  for (const auto& [k, v] : res.headers) h += k + ": " + v + "\r\n";
  const bool no_body = res.status < 200 || res.status == 204 || res.status == 304;
  if (chunked)
    h += "Transfer-Encoding: chunked\r\n";
  else if (!no_body)
    h += "Content-Length: " + std::to_string(length) + "\r\n";
  h += keep ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
  h += "\r\n";
  return h;
}

// A streamed body, chunk-encoded onto the socket.
class ChunkSink final : public BodySink {
 public:
  ChunkSink(int fd, std::chrono::milliseconds timeout) : fd_(fd), timeout_(timeout) {}
  bool write(std::string_view data) override {
    if (!ok_) return false;
    if (data.empty()) return true;  // an empty chunk would end the body
    char size[24];
    std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
    std::string frame = size;
    frame.append(data);
    frame += "\r\n";
    ok_ = send_all(fd_, frame, timeout_);
    return ok_;
  }
  bool ok() const { return ok_; }

 private:
  int fd_;
  std::chrono::milliseconds timeout_;
  bool ok_ = true;
};

}  // namespace

struct HttpListener::Conn {
  int fd = -1;
  std::string remote;
  std::string in;     // received, not yet parsed
  size_t in_off = 0;  // parsed prefix of `in`
  RequestParser parser;
  Clock::time_point deadline;       // when the connection is cut if nothing completes
  Clock::time_point body_deadline;  // the whole body by then
  bool draining = false;            // answered an error: discard input until EOF or deadline
  int served = 0;
  explicit Conn(const HttpLimits& l) : parser(l) {}
};

HttpListener::HttpListener(ListenerOptions opt, Handler handler, Classifier heavy,
                           ErrorHandler on_error)
    : opt_(opt),
      handler_(std::move(handler)),
      heavy_(std::move(heavy)),
      on_error_(std::move(on_error)) {
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (wake_fd_ < 0) throw std::runtime_error(std::string("eventfd: ") + std::strerror(errno));
}

HttpListener::~HttpListener() {
  stop();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  ::close(wake_fd_);
}

int HttpListener::bind(const std::string& host, int port) {
  const std::string where = host + ":" + (port ? std::to_string(port) : std::string("any port"));
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0)
    throw std::runtime_error("cannot bind " + where + ": " + gai_strerror(rc));
  std::string why = "no address";
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    // SO_REUSEADDR: a restart binds at once past TIME_WAIT. Not SO_REUSEPORT, with which a
    // second server on a port in use would start and silently take half the connections.
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, SOMAXCONN) == 0) {
      sockaddr_storage ss{};
      socklen_t len = sizeof(ss);
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
      listen_fd_ = fd;
      ::freeaddrinfo(res);
      return ntohs(ss.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(ss).sin6_port
                                            : reinterpret_cast<sockaddr_in&>(ss).sin_port);
    }
    why = std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(res);
  throw std::runtime_error("cannot bind " + where + " (" + why + ")");
}

void HttpListener::stop() {
  stopping_.store(true);
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));
}

bool HttpListener::run() {
  if (listen_fd_ < 0) return false;
  const int ep = ::epoll_create1(EPOLL_CLOEXEC);
  if (ep < 0) return false;
  light_ = std::make_unique<TaskPool>(std::max(1, opt_.light_threads));
  heavy_pool_ = std::make_unique<TaskPool>(std::max(1, opt_.heavy_threads));
  const bool ok = loop(ep);
  // Shut down: no new connections; idle ones closed; busy ones shut so that their handlers see
  // the client gone and return; then the pools drain and join.
  ::close(listen_fd_);
  listen_fd_ = -1;
  for (auto& [fd, c] : conns_) ::close(fd);
  conns_.clear();
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (int fd : busy_) ::shutdown(fd, SHUT_RDWR);
  }
  heavy_pool_.reset();
  light_.reset();
  for (auto& c : returned_) ::close(c->fd);
  returned_.clear();
  ::close(ep);
  return ok;
}

bool HttpListener::loop(int ep) {
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listen_fd_;
  if (::epoll_ctl(ep, EPOLL_CTL_ADD, listen_fd_, &ev) != 0) return false;
  ev.data.fd = wake_fd_;
  if (::epoll_ctl(ep, EPOLL_CTL_ADD, wake_fd_, &ev) != 0) return false;
  bool accepting = true;
  Clock::time_point resume_accept{}, next_sweep = Clock::now() + kTick;
  std::vector<epoll_event> evs(256);
  while (!stopping_.load()) {
    const int n = ::epoll_wait(ep, evs.data(), int(evs.size()), int(kTick.count()));
    if (n < 0 && errno != EINTR) return false;
    for (int i = 0; i < n; ++i) {
      const int fd = evs[size_t(i)].data.fd;
      if (fd == listen_fd_) {
        // out of descriptors: stop polling the listener for a moment instead of spinning on it
        if (!accept_all(ep)) {
          ::epoll_ctl(ep, EPOLL_CTL_DEL, listen_fd_, nullptr);
          accepting = false;
          resume_accept = Clock::now() + kTick;
        }
      } else if (fd == wake_fd_) {
        uint64_t v;
        [[maybe_unused]] ssize_t r = ::read(wake_fd_, &v, sizeof(v));
        take_back(ep);
      } else if (auto it = conns_.find(fd); it != conns_.end()) {
        const ConnPtr c = it->second;  // a copy: on_readable may erase the entry
        on_readable(ep, c);
      }
    }
    const auto now = Clock::now();
    if (!accepting && now >= resume_accept) {
      ev.events = EPOLLIN;
      ev.data.fd = listen_fd_;
      accepting = ::epoll_ctl(ep, EPOLL_CTL_ADD, listen_fd_, &ev) == 0;
    }
    if (now >= next_sweep) {
      sweep(ep);
      next_sweep = now + kTick;
    }
  }
  return true;
}

// Accepts every pending connection. Returns false when out of file descriptors.
bool HttpListener::accept_all(int ep) {
  for (;;) {
    sockaddr_storage ss{};
    socklen_t len = sizeof(ss);
    const int fd =
        ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      return errno != EMFILE && errno != ENFILE && errno != ENOBUFS && errno != ENOMEM;
    }
    size_t busy;
    {
      std::lock_guard<std::mutex> lk(mu_);
      busy = busy_.size() + returned_.size();
    }
    if (conns_.size() + busy >= size_t(opt_.max_connections)) {
      static constexpr std::string_view kFull =
          "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\n"
          "Connection: close\r\n\r\n";
      [[maybe_unused]] ssize_t w = ::send(fd, kFull.data(), kFull.size(), MSG_NOSIGNAL);
      ::close(fd);
      continue;
    }
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // SSE frames go out at once
    auto c = std::make_shared<Conn>(opt_.limits);
    c->fd = fd;
    c->remote = peer_name(ss);
    c->deadline = Clock::now() + opt_.idle_timeout;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd;
    if (::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
      ::close(fd);
      continue;
    }
    conns_.emplace(fd, std::move(c));
  }
}

void HttpListener::on_readable(int ep, const ConnPtr& c) {
  char buf[kReadChunk];
  for (;;) {
    const ssize_t n = ::recv(c->fd, buf, sizeof(buf), 0);
    if (n > 0) {
      if (c->draining) continue;
      c->in.append(buf, size_t(n));
      if (advance(ep, c)) return;  // handed to a worker, refused or closed
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    close_conn(ep, c);  // end of stream (the request, if any, incomplete) or an error
    return;
  }
}

// Feeds what arrived to the parser and moves the connection on. Returns true when the loop is
// done reading it for now (dispatched, refused or closed).
bool HttpListener::advance(int ep, const ConnPtr& c) {
  const bool was_started = c->parser.started(), had_head = c->parser.head_done();
  const size_t used = c->parser.feed(std::string_view(c->in).substr(c->in_off));
  c->in_off += used;
  if (c->in_off == c->in.size() || c->in_off > kReadChunk) {
    c->in.erase(0, c->in_off);
    c->in_off = 0;
  }
  const auto now = Clock::now();
  if (!was_started && c->parser.started()) c->deadline = now + opt_.head_timeout;
  if (c->parser.failed()) {
    refuse(ep, c, c->parser.error_status(), c->parser.error_message());
    return true;
  }
  if (!had_head && c->parser.head_done()) {
    c->body_deadline = now + opt_.body_timeout;
    if (c->parser.expects_continue() && !c->parser.done()) {
      static constexpr std::string_view k100 = "HTTP/1.1 100 Continue\r\n\r\n";
      [[maybe_unused]] ssize_t w = ::send(c->fd, k100.data(), k100.size(), MSG_NOSIGNAL);
    }
  }
  if (c->parser.head_done() && used > 0)
    c->deadline = std::min(now + opt_.body_idle_timeout, c->body_deadline);
  if (c->parser.done()) {
    dispatch(ep, c);
    return true;
  }
  return false;
}

// Answers a request that failed while it was read, then drains: the client may still be
// sending (a body over the limit), and closing with unread input would reset the connection
// and often destroy the answer before the client reads it.
void HttpListener::refuse(int ep, const ConnPtr& c, int status, const std::string& why) {
  HttpResponse res;
  res.status = status;
  on_error_(c->parser.request(), status, why, res);
  const std::string out = head_of(res, false, false, res.body.size()) + res.body;
  [[maybe_unused]] ssize_t w = ::send(c->fd, out.data(), out.size(), MSG_NOSIGNAL);
  ::shutdown(c->fd, SHUT_WR);
  c->draining = true;
  c->in.clear();
  c->in_off = 0;
  c->deadline = Clock::now() + kDrainTime;
  (void)ep;
}

void HttpListener::dispatch(int ep, const ConnPtr& c) {
  ::epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, nullptr);
  conns_.erase(c->fd);
  {
    std::lock_guard<std::mutex> lk(mu_);
    busy_.insert(c->fd);
  }
  TaskPool& pool = heavy_(c->parser.request()) ? *heavy_pool_ : *light_;
  pool.submit([this, c] { serve(c); });
}

void HttpListener::serve(const ConnPtr& c) {
  HttpRequest& req = c->parser.request();
  req.fd = c->fd;
  req.remote_addr = c->remote;
  HttpResponse res;
  handler_(req, res);
  const bool keep = req.keep_alive() && !res.close && !stopping_.load() &&
                    ++c->served < opt_.max_requests_per_connection;
  const bool written = write_response(c, req, res, keep);
  release(c, !written ? After::kClose : keep ? After::kKeep : After::kDrain);
}

bool HttpListener::write_response(const ConnPtr& c, const HttpRequest& req, HttpResponse& res,
                                  bool keep) {
  const bool head_only = req.method == "HEAD";
  if (!res.next) {
    std::string out = head_of(res, false, keep, res.body.size());
    if (!head_only) out += res.body;
    return send_all(c->fd, out, opt_.write_timeout);
  }
  bool ok = send_all(c->fd, head_of(res, true, keep, 0), opt_.write_timeout);
  ChunkSink sink(c->fd, opt_.write_timeout);
  while (ok && !sink.finished())
    if (!res.next(sink) || !sink.ok()) ok = false;
  if (ok) ok = send_all(c->fd, "0\r\n\r\n", opt_.write_timeout);
  if (res.done) res.done(ok);
  return ok;
}

// A worker is done with a connection: back to the loop for its next request, back to be
// drained (answered with "Connection: close": closing now, with pipelined bytes unread, would
// reset the connection and could destroy the answer in flight), or closed. The busy entry goes
// under the same lock as the close, so stop() never shuts a reused fd number.
void HttpListener::release(const ConnPtr& c, After after) {
  std::lock_guard<std::mutex> lk(mu_);
  busy_.erase(c->fd);
  if (after == After::kClose || stopping_.load()) {
    ::close(c->fd);
    return;
  }
  c->parser.reset();
  if (after == After::kDrain) {
    ::shutdown(c->fd, SHUT_WR);
    c->draining = true;
  }
  returned_.push_back(c);
  const uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_fd_, &one, sizeof(one));
}

void HttpListener::take_back(int ep) {
  std::vector<ConnPtr> back;
  {
    std::lock_guard<std::mutex> lk(mu_);
    back.swap(returned_);
  }
  for (auto& c : back) {
    c->deadline = Clock::now() + (c->draining ? kDrainTime : opt_.idle_timeout);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = c->fd;
    if (::epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev) != 0) {
      ::close(c->fd);
      continue;
    }
    conns_.emplace(c->fd, c);
    // a pipelined request may already be buffered whole
    if (!c->draining && c->in_off < c->in.size()) advance(ep, c);
  }
}

void HttpListener::sweep(int ep) {
  const auto now = Clock::now();
  std::vector<ConnPtr> late;
  for (const auto& [fd, c] : conns_)
    if (now >= c->deadline) late.push_back(c);
  for (const auto& c : late) {
    if (!c->draining && c->parser.started()) {
      refuse(ep, c, 408, "the request was not received in time");
      c->deadline = now + std::chrono::milliseconds(200);  // a short drain: it was too slow
      continue;
    }
    close_conn(ep, c);
  }
}

void HttpListener::close_conn(int ep, const ConnPtr& c) {
  ::epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, nullptr);
  ::close(c->fd);
  conns_.erase(c->fd);
}

}  // namespace cedar::server
