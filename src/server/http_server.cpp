#include "server/http_server.h"

#include <httplib.h>

#include <chrono>
#include <cstdio>

#include "base/json_limits.h"
#include "server/anthropic_api.h"
#include "server/openai_api.h"
#include "server/request_aliases.h"
#include "server/responses_api.h"
#include "server/sse.h"
#include "server/webui.h"

namespace cedar::server {

namespace {

using Clock = std::chrono::steady_clock;

// Set by a generation handler that logs its own request when the response ends (with tokens and
// timings); the httplib logger, called on the same connection thread, then skips it.
thread_local bool t_logged_at_end = false;

bool is_anthropic_path(const std::string& path) {
  return path.rfind("/anthropic/", 0) == 0 || path.rfind("/v1/messages", 0) == 0;
}

ApiFlavor flavor_of(const std::string& path) {
  return is_anthropic_path(path) ? ApiFlavor::kAnthropic : ApiFlavor::kOpenAI;
}

void send_json(httplib::Response& res, int status, const ojson& body) {
  res.status = status;
  res.set_content(json_text(body) + "\n", "application/json");
}

void send_error(httplib::Response& res, const ApiError& e, ApiFlavor flavor) {
  // the rest of a refused body is still on the socket: the connection cannot be reused
  if (e.status() == 413) res.set_header("Connection", "close");
  send_json(res, e.status(), error_body(e, flavor));
}

// The request body, read through httplib's content reader so that the limit holds for a chunked
// body too (httplib 0.11 applies its payload limit to Content-Length bodies only, and a 200 MiB
// chunked body was buffered whole before any check). Reading this way also skips httplib's form
// decoding, which refused bodies over 8 KiB sent with curl -d's default form content type.
std::string read_body(const httplib::Request& req, const httplib::ContentReader& reader,
                      size_t max_bytes) {
  std::string body;
  bool too_large = false;
  const bool ok = reader([&](const char* data, size_t n) {
    if (n > max_bytes - body.size()) {
      too_large = true;
      return false;
    }
    body.append(data, n);
    return true;
  });
  // (a Content-Length over the limit httplib refuses itself, before any byte is received)
  if (!ok && !too_large && req.has_header("Content-Length")) {
    const std::string cl = req.get_header_value("Content-Length");
    too_large = !cl.empty() && cl.find_first_not_of("0123456789") == std::string::npos &&
                (cl.size() > 19 || std::stoull(cl) > max_bytes);
  }
  if (too_large)
    throw ApiError(413,
                   "Request body too large: the limit is " + std::to_string(max_bytes) + " bytes");
  if (!ok)
    throw ApiError(400,
                   "the request body could not be read (malformed chunked encoding, or the "
                   "client stopped sending)");
  return body;
}

ojson parse_body(const std::string& text) {
  if (text.empty()) throw ApiError(400, "the request body is empty: expected a JSON object");
  std::string why;
  ojson body = parse_untrusted_json(text, &why);
  if (body.is_discarded()) throw ApiError(400, "Invalid JSON in the request body: " + why);
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  return body;
}

bool authorized(const httplib::Request& req, const std::string& key) {
  if (key.empty()) return true;
  const std::string auth = req.get_header_value("Authorization");
  if (auth.size() > 7 && (auth.rfind("Bearer ", 0) == 0 || auth.rfind("bearer ", 0) == 0) &&
      auth.substr(7) == key)
    return true;
  return req.get_header_value("x-api-key") == key;
}

// The response plumbing shared by all generation endpoints.
struct Streaming {
  std::shared_ptr<Job> job;
  std::unique_ptr<StreamFormat> fmt;
  bool stream = false;
  bool done = false;
  std::chrono::milliseconds keepalive{2000};
  Clock::time_point last_write = Clock::now();
  std::vector<CompletionEvent> evs;
  // Called once when the response has ended: `completed` false when the client went away first
  // (the request's log line and latency figures).
  std::function<void(const Streaming&, bool completed)> on_end;
  bool ended = false;
  void end(bool completed) {
    if (ended) return;
    ended = true;
    if (on_end) on_end(*this, completed);
  }

  // The next piece of the body: frames (streaming) or, at the end, the JSON body (non-streaming);
  // a keep-alive when nothing was written for `keepalive`. A non-streaming body writes nothing
  // while tokens arrive, so without the padding a client that left would not be noticed (a
  // write is what fails) and its generation would run on to max_tokens.
  std::string next() {
    std::string out = pieces();
    if (out.empty() && Clock::now() - last_write >= keepalive)
      out = stream ? sse_comment("keep-alive") : "\n";
    if (!out.empty()) last_write = Clock::now();
    return out;
  }

  std::string pieces() {
    std::string out;
    evs.clear();
    if (!job->wait(&evs, keepalive)) return out;
    for (const auto& e : evs) {
      if (e.kind == CompletionEvent::Kind::kDone) {
        done = true;
        const Outcome o = job->outcome();
        if (stream) {
          fmt->event(e, &o, &out);
        } else if (o.finish == Finish::kError) {
          out += json_text(error_body(ApiError(500, o.error), fmt->flavor())) + "\n";
        } else {
          out += json_text(fmt->body(o)) + "\n";
        }
        break;
      }
      if (stream) fmt->event(e, nullptr, &out);
    }
    return out;
  }
};

void serve_job(httplib::Response& res, std::shared_ptr<Streaming> st) {
  if (!st->stream) {
    // Short completions get an ordinary response (and a 500 status if generation failed);
    // longer ones switch to a chunked body padded with newlines, which JSON parsers skip, so that
    // a client that went away is noticed and its job cancelled.
    const auto until = Clock::now() + st->keepalive;
    std::vector<CompletionEvent> evs;
    while (!st->job->finished() && Clock::now() < until)
      st->job->wait(&evs,
                    std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now()));
    if (st->job->finished()) {
      const Outcome o = st->job->outcome();
      if (o.finish == Finish::kError)
        send_error(res, ApiError(500, o.error), st->fmt->flavor());
      else
        send_json(res, 200, st->fmt->body(o));
      st->end(true);
      return;
    }
  } else {
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
  }
  res.status = 200;
  res.set_chunked_content_provider(
      st->stream ? "text/event-stream" : "application/json",
      [st](size_t, httplib::DataSink& sink) {
        if (st->done) {
          sink.done();
          return true;
        }
        const std::string out = st->next();
        if (!out.empty() && !sink.write(out.data(), out.size())) {
          st->job->cancel();  // the client went away
          return false;
        }
        if (st->done) sink.done();
        return true;
      },
      [st](bool success) {
        if (!success || !st->done) st->job->cancel();
        st->end(success && st->done);
      });
}

const char* endpoint_name(int e) {
  static const char* names[] = {"chat", "completions", "responses", "messages"};
  return names[e];
}

}  // namespace

HttpServer::HttpServer(Metrics& metrics, ServerConfig cfg, int http_threads)
    : metrics_(metrics),
      cfg_(std::move(cfg)),
      log_(cfg_.log_format),
      http_(std::make_unique<httplib::Server>()) {
  const size_t n = size_t(std::max(4, http_threads));
  http_->new_task_queue = [n] { return new httplib::ThreadPool(n); };
  http_->set_payload_max_length(cfg_.max_body_bytes);
  // SO_REUSEADDR (a restart binds at once past TIME_WAIT) but not httplib's default SO_REUSEPORT,
  // with which a second server on a port in use starts and silently takes half the connections
  http_->set_socket_options([](socket_t sock) {
    int yes = 1;
    setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
  });
  // a client gets 10 s per read of its request (and an idle keep-alive connection as long): slow
  // or idle sockets give their thread back instead of holding it for half a minute
  http_->set_read_timeout(10, 0);
  http_->set_write_timeout(30, 0);
  routes();
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::bind(const std::string& host, int port) {
  if (port == 0) {
    const int p = http_->bind_to_any_port(host);
    if (p <= 0) throw std::runtime_error("cannot bind " + host + " (any port)");
    return p;
  }
  if (!http_->bind_to_port(host, port))
    throw std::runtime_error("cannot bind " + host + ":" + std::to_string(port) +
                             " (in use, or not a local address?)");
  return port;
}

void HttpServer::attach(runtime::Engine& engine, Scheduler& scheduler, bool prefix_cache) {
  if (ctx_) throw std::logic_error("HttpServer::attach called twice");
  cfg_.prefix_cache = prefix_cache;
  ctx_.emplace(ApiContext{engine, scheduler, metrics_, cfg_});
  ready_.store(true, std::memory_order_release);
}

bool HttpServer::listen() { return http_->listen_after_bind(); }

void HttpServer::stop() {
  if (http_) http_->stop();
}

void HttpServer::routes() {
  httplib::Server& s = *http_;
  using httplib::Request;
  using httplib::Response;

  // One log line per request: generations log theirs when the response ends (Streaming::end).
  s.set_logger([this](const Request& req, const Response& res) {
    if (std::exchange(t_logged_at_end, false)) return;
    RequestRecord rec;
    rec.method = req.method;
    rec.path = req.path;
    rec.remote = req.remote_addr;
    rec.status = res.status;
    log_.request(rec);
  });

  // API key on everything but the health check (and CORS preflights, which carry no key);
  // nothing but the health check while loading.
  s.set_pre_routing_handler([this](const Request& req, Response& res) {
    // the health check and the chat page (static; it sends the key with its API calls) are open
    if (req.path == "/health" || (req.path == "/" && req.method == "GET"))
      return httplib::Server::HandlerResponse::Unhandled;
    if (req.method == "OPTIONS" && !cfg_.cors_origin.empty())
      return httplib::Server::HandlerResponse::Unhandled;
    if (!ready_.load(std::memory_order_acquire)) {
      res.set_header("Retry-After", "5");
      send_error(res, ApiError(503, "the model is still loading; retry in a few seconds"),
                 flavor_of(req.path));
      return httplib::Server::HandlerResponse::Handled;
    }
    if (authorized(req, cfg_.api_key)) return httplib::Server::HandlerResponse::Unhandled;
    send_error(res,
               ApiError(401,
                        "Authentication Fails: a valid API key is required (Authorization: Bearer "
                        "<key> or x-api-key: <key>)"),
               flavor_of(req.path));
    metrics_.request_done("auth", 401);
    return httplib::Server::HandlerResponse::Handled;
  });
  // Errors httplib produces itself (no route, body too large, bad request line) get JSON bodies.
  s.set_error_handler(
      httplib::Server::HandlerWithResponse([this](const Request& req, Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        std::string msg;
        switch (res.status) {
          case 404:
            msg = "Not found: " + req.method + " " + req.path;
            break;
          case 413:
            msg = "Request body too large: the limit is " + std::to_string(cfg_.max_body_bytes) +
                  " bytes";
            break;
          default:
            msg = "HTTP error " + std::to_string(res.status);
        }
        send_error(res, ApiError(res.status, msg), flavor_of(req.path));
        metrics_.request_done("other", res.status);
        return httplib::Server::HandlerResponse::Handled;
      }));
  s.set_exception_handler([](const Request& req, Response& res, std::exception_ptr ep) {
    std::string msg = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      msg += std::string(": ") + e.what();
    } catch (...) {
    }
    send_error(res, ApiError(500, msg), flavor_of(req.path));
  });

  if (!cfg_.cors_origin.empty()) {
    s.set_post_routing_handler([this](const Request&, Response& res) {
      res.set_header("Access-Control-Allow-Origin", cfg_.cors_origin);
      if (cfg_.cors_origin != "*") res.set_header("Vary", "Origin");
    });
    s.Options(R"(/.*)", [](const Request&, Response& res) {
      res.status = 204;
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      res.set_header("Access-Control-Allow-Headers",
                     "Authorization, Content-Type, x-api-key, anthropic-version, "
                     "anthropic-beta, OpenAI-Organization, OpenAI-Project, x-stainless-*");
      res.set_header("Access-Control-Max-Age", "600");
    });
  }
  s.Get("/", [](const Request&, Response& res) {
    res.set_header("Content-Security-Policy",
                   "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'");
    res.set_header("X-Content-Type-Options", "nosniff");
    const std::string_view page = webui_index_html();
    res.set_content(page.data(), page.size(), "text/html; charset=utf-8");
  });
  s.Get("/health", [this](const Request&, Response& res) {
    if (!ready_.load(std::memory_order_acquire)) {
      send_json(res, 503, {{"status", "loading"}, {"model", cfg_.model_name}});
      return;
    }
    send_json(res, 200,
              {{"status", "ok"},
               {"model", cfg_.model_name},
               {"active", scheduler().active()},
               {"queued", scheduler().queued()},
               {"ctx_size", scheduler().ctx_size()},
               {"prefix_cache", cfg_.prefix_cache}});
  });
  s.Get("/metrics", [this](const Request&, Response& res) {
    metrics_.set_queue(scheduler().queued(), scheduler().active());
    metrics_.set_batch(engine().batcher_stats());
    res.set_content(metrics_.prometheus(), "text/plain; version=0.0.4");
  });
  for (const char* p : {"/v1/models", "/models"})
    s.Get(p, [this](const Request&, Response& res) {
      send_json(res, 200, models_body(cfg_.model_name));
    });

  auto generation = [this](Endpoint ep) {
    return [this, ep](const Request& req, Response& res, const httplib::ContentReader& reader) {
      const ApiFlavor flavor =
          ep == Endpoint::kAnthropic ? ApiFlavor::kAnthropic : ApiFlavor::kOpenAI;
      try {
        const ojson body = parse_body(read_body(req, reader, cfg_.max_body_bytes));
        auto st = std::make_shared<Streaming>();
        st->keepalive = std::chrono::milliseconds(std::max(50, cfg_.keepalive_ms));
        PreparedRequest p;
        switch (ep) {
          case Endpoint::kChat: {
            const std::string id = new_id("chatcmpl-");
            warn_ignored_fields(body, [this](const std::string& m) { log_.warn(m); });
            p = prepare_chat(*ctx_, apply_chat_aliases(body), id, "call_" + id.substr(9) + "_");
            st->fmt = std::make_unique<ChatCompletionFormat>(
                p.id, p.model, p.created,
                p.spec.setup.parser.start == text::GenerationStart::kReasoning,
                p.opts.include_usage, p.opts.logprobs);
            break;
          }
          case Endpoint::kCompletion:
            p = prepare_completion(*ctx_, body, new_id("cmpl-"));
            st->fmt = std::make_unique<CompletionFormat>(p.id, p.model, p.created,
                                                         p.opts.include_usage, p.opts.logprobs);
            break;
          case Endpoint::kResponses: {
            const std::string id = new_id("resp_");
            p = prepare_chat(*ctx_, responses_to_chat(body), id, "call_" + id.substr(5) + "_");
            st->fmt = std::make_unique<ResponsesFormat>(p.id, p.model, p.created, body);
            break;
          }
          case Endpoint::kAnthropic: {
            const std::string id = new_id("msg_");
            p = prepare_chat(*ctx_, anthropic_to_chat(body), id, "toolu_" + id.substr(4) + "_");
            st->fmt = std::make_unique<AnthropicFormat>(p.id, p.model);
            break;
          }
        }
        st->stream = p.opts.stream;
        st->job = std::make_shared<Job>(std::move(p.spec));
        scheduler().submit(st->job);
        RequestRecord rec;
        rec.method = req.method;
        rec.path = req.path;
        rec.remote = req.remote_addr;
        st->on_end = [this, rec](const Streaming& s, bool completed) mutable {
          const Outcome o = s.job->outcome();
          rec.status = o.finish == Finish::kError ? 500 : 200;
          rec.seconds = s.job->seconds_to_done();
          rec.ttft_seconds = s.job->seconds_to_first_token();
          rec.prompt_tokens = o.usage.prompt_tokens;
          rec.cached_tokens = o.usage.cached_tokens;
          rec.completion_tokens = o.usage.completion_tokens;
          rec.finish = completed ? openai_finish_reason(o.finish) : "client-gone";
          if (completed && rec.status == 200)
            metrics_.observe_generation(rec.seconds, rec.ttft_seconds);
          log_.request(rec);
        };
        t_logged_at_end = true;
        serve_job(res, st);
      } catch (const ApiError& e) {
        send_error(res, e, flavor);
      } catch (const text::RequestError& e) {
        send_error(res, ApiError::from(e), flavor);
      } catch (const std::exception& e) {
        send_error(res, ApiError(500, std::string("internal error: ") + e.what()), flavor);
      }
      metrics_.request_done(endpoint_name(int(ep)), res.status);
    };
  };
  for (const char* p : {"/v1/chat/completions", "/chat/completions", "/beta/chat/completions",
                        "/beta/v1/chat/completions"})
    s.Post(p, generation(Endpoint::kChat));
  for (const char* p :
       {"/v1/completions", "/completions", "/beta/completions", "/beta/v1/completions"})
    s.Post(p, generation(Endpoint::kCompletion));
  for (const char* p : {"/v1/responses", "/responses"}) s.Post(p, generation(Endpoint::kResponses));
  for (const char* p : {"/anthropic/v1/messages", "/v1/messages"})
    s.Post(p, generation(Endpoint::kAnthropic));

  auto count_tokens = [this](const Request& req, Response& res,
                             const httplib::ContentReader& reader) {
    try {
      const ojson body = parse_body(read_body(req, reader, cfg_.max_body_bytes));
      ojson b = body;
      if (!b.contains("max_tokens")) b["max_tokens"] = 1;  // not needed to count
      ojson chat = anthropic_to_chat(b);
      (void)require_model(chat);
      const runtime::Prompt p = engine().render_chat(text::parse_chat_request(chat));
      send_json(res, 200, {{"input_tokens", int64_t(p.ids.size())}});
    } catch (const ApiError& e) {
      send_error(res, e, ApiFlavor::kAnthropic);
    } catch (const text::RequestError& e) {
      send_error(res, ApiError::from(e), ApiFlavor::kAnthropic);
    } catch (const std::exception& e) {
      send_error(res, ApiError(400, std::string("cannot count tokens: ") + e.what()),
                 ApiFlavor::kAnthropic);
    }
    metrics_.request_done("count_tokens", res.status);
  };
  for (const char* p : {"/anthropic/v1/messages/count_tokens", "/v1/messages/count_tokens"})
    s.Post(p, count_tokens);
}

}  // namespace cedar::server
