#include "server/http_server.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "base/json_limits.h"
#include "server/anthropic_api.h"
#include "server/field_warnings.h"
#include "server/info_api.h"
#include "server/openai_api.h"
#include "server/request_aliases.h"
#include "server/responses_api.h"
#include "server/sse.h"
#include "server/webui.h"

namespace cedar::server {

namespace {

using Clock = std::chrono::steady_clock;

bool is_anthropic_path(const std::string& path) {
  return path.rfind("/anthropic/", 0) == 0 || path.rfind("/v1/messages", 0) == 0;
}

ApiFlavor flavor_of(const std::string& path) {
  return is_anthropic_path(path) ? ApiFlavor::kAnthropic : ApiFlavor::kOpenAI;
}

void send_json(HttpResponse& res, int status, const ojson& body) {
  res.status = status;
  res.set_content(json_text(body) + "\n", "application/json");
}

void send_error(HttpResponse& res, const ApiError& e, ApiFlavor flavor) {
  send_json(res, e.status(), error_body(e, flavor));
  res.log_reason = e.what();
}

// A client's X-Request-Id when it is a sane token (up to 128 visible ASCII characters, so that it
// can go into a header and a log line as is); else a new id.
std::string request_id(const HttpRequest& req) {
  const std::string& given = req.header("x-request-id");
  const bool sane = !given.empty() && given.size() <= 128 &&
                    std::all_of(given.begin(), given.end(),
                                [](char c) { return c > ' ' && c < 127 && c != '"' && c != '\\'; });
  return sane ? given : new_id("req_");
}

// The request's log line before its outcome is known.
RequestRecord record_of(const HttpRequest& req) {
  RequestRecord rec;
  rec.id = req.id;
  rec.method = req.method;
  rec.path = req.path;
  rec.remote = req.remote_addr;
  return rec;
}

ojson parse_body(const std::string& text) {
  if (text.empty()) throw ApiError(400, "the request body is empty: expected a JSON object");
  std::string why;
  ojson body = parse_untrusted_json(text, &why);
  if (body.is_discarded()) throw ApiError(400, "Invalid JSON in the request body: " + why);
  if (!body.is_object()) throw ApiError(400, "the request body must be a JSON object");
  return body;
}

bool authorized(const HttpRequest& req, const std::string& key) {
  if (key.empty()) return true;
  const std::string& auth = req.header("authorization");
  if (auth.size() > 7 && (auth.rfind("Bearer ", 0) == 0 || auth.rfind("bearer ", 0) == 0) &&
      auth.substr(7) == key)
    return true;
  return req.header("x-api-key") == key;
}

// The response plumbing shared by all generation endpoints.
struct Streaming {
  std::shared_ptr<Job> job;
  std::unique_ptr<StreamFormat> fmt;
  bool stream = false;
  bool done = false;
  std::chrono::milliseconds keepalive{2000};
  Clock::time_point last_write = Clock::now();
  Clock::time_point deadline = Clock::time_point::max();  // --request-timeout
  std::string deadline_error;
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
    check_deadline();
    std::string out = pieces();
    if (out.empty() && Clock::now() - last_write >= keepalive)
      out = stream ? sse_comment("keep-alive") : "\n";
    if (!out.empty()) last_write = Clock::now();
    return out;
  }

  // A job past its deadline ends (the scheduler reports it as an error) at its next step.
  void check_deadline() {
    if (!done && Clock::now() >= deadline) job->expire(deadline_error);
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

// Hands the job's answer to the response. A client that leaves is noticed by a peek at its
// socket (it closed or reset its side) or by a failed write, and its job is cancelled.
void serve_job(const HttpRequest& req, HttpResponse& res, std::shared_ptr<Streaming> st) {
  if (!st->stream) {
    // Short completions get an ordinary response (and a 500 status if generation failed);
    // longer ones switch to a chunked body padded with newlines, which JSON parsers skip and
    // proxies take as traffic.
    const auto until = Clock::now() + st->keepalive;
    std::vector<CompletionEvent> evs;
    while (!st->job->finished() && Clock::now() < until) {
      if (req.client_gone()) {
        st->job->cancel();
        res.close = true;
        st->end(false);
        return;
      }
      st->check_deadline();
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
      st->job->wait(&evs, std::min(left, std::chrono::milliseconds(100)));
    }
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
  res.set_stream(
      st->stream ? "text/event-stream" : "application/json",
      [st, &req](BodySink& sink) {
        if (req.client_gone()) return false;
        const std::string out = st->next();
        if (!out.empty() && !sink.write(out)) return false;
        if (st->done) sink.finish();
        return true;
      },
      [st](bool completed) {
        if (!completed || !st->done) st->job->cancel();  // the client went away
        st->end(completed && st->done);
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
      images_(std::make_unique<ImagePool>(cfg_.images)),
      log_(cfg_.log_format) {
  policy_.allowed_hosts = cfg_.allowed_hosts;
  policy_.cors = cfg_.cors_origin;
  routes();
  ListenerOptions opt;
  opt.limits.max_body_bytes = cfg_.max_body_bytes;
  opt.heavy_threads = std::max(4, http_threads);
  // open connections stay below the descriptor limit (the model's shards and the cache use some)
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY)
    opt.max_connections = int(std::clamp<rlim_t>(nofile.rlim_cur / 2, 16, 4096));
  http_ = std::make_unique<HttpListener>(
      opt, [this](HttpRequest& req, HttpResponse& res) { handle(req, res); },
      [this](const HttpRequest& req) {
        const auto it = routes_.find(req.path);
        return it != routes_.end() && !it->second.empty() && it->second.front().heavy;
      },
      [this](const HttpRequest& req, int status, const std::string& why, HttpResponse& res) {
        refused(req, status, why, res);
      });
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::bind(const std::string& host, int port) {
  policy_.bound_host = host;
  return http_->bind(host, port);
}

void HttpServer::attach(runtime::Engine& engine, Scheduler& scheduler, bool prefix_cache) {
  if (ctx_) throw std::logic_error("HttpServer::attach called twice");
  cfg_.prefix_cache = prefix_cache;
  ctx_.emplace(ApiContext{engine, scheduler, metrics_, cfg_, *images_, {}});
  ready_.store(true, std::memory_order_release);
}

bool HttpServer::listen() { return http_->run(); }

void HttpServer::stop() {
  if (http_) http_->stop();
  images_->stop();  // decodes end within a row: no handler waits on one
}

void HttpServer::add(const std::string& method, const std::string& path, Handler h, bool heavy) {
  routes_[path].push_back(Route{method, std::move(h), heavy});
}

// A request refused while it was read (malformed, too large, too slow): a JSON error body in the
// flavour of the API its path names.
void HttpServer::refused(const HttpRequest& req, int status, const std::string& why,
                         HttpResponse& res) {
  send_error(res, ApiError(status, why), flavor_of(req.path));
  metrics_.request_done("other", status);
  RequestRecord rec = record_of(req);
  rec.id = new_id("req_");  // (the request was not read whole: no header of its own is trusted)
  res.set_header("X-Request-Id", rec.id);
  rec.status = status;
  rec.reason = why;
  log_.request(rec);
}

// Whether the request may reach its route: nothing that fails the browser and network boundary
// (origin_policy.h); then the health check and the chat page (static; it sends the key with its
// API calls) are open, CORS preflights carry no key, nothing else is served while the model
// loads, and the rest needs the API key if one is set.
bool HttpServer::gate(const HttpRequest& req, HttpResponse& res) {
  if (const auto refusal = check_boundary(req, policy_)) {
    send_error(res, ApiError(refusal->status, refusal->why), flavor_of(req.path));
    metrics_.request_done("refused", refusal->status);
    return false;
  }
  if (req.path == "/health" || (req.path == "/" && (req.method == "GET" || req.method == "HEAD")))
    return true;
  if (req.method == "OPTIONS" && !cfg_.cors_origin.empty()) return true;
  if (!ready_.load(std::memory_order_acquire)) {
    res.set_header("Retry-After", "5");
    send_error(res, ApiError(503, "the model is still loading; retry in a few seconds"),
               flavor_of(req.path));
    return false;
  }
  if (authorized(req, cfg_.api_key)) return true;
  send_error(res,
             ApiError(401,
                      "Authentication Fails: a valid API key is required (Authorization: Bearer "
                      "<key> or x-api-key: <key>)"),
             flavor_of(req.path));
  metrics_.request_done("auth", 401);
  return false;
}

void HttpServer::handle(HttpRequest& req, HttpResponse& res) {
  req.id = request_id(req);
  try {
    if (gate(req, res)) {
      const auto it = routes_.find(req.path);
      const std::string& method = req.method == "HEAD" ? std::string("GET") : req.method;
      const Route* route = nullptr;
      if (it != routes_.end())
        for (const Route& r : it->second)
          if (r.method == method) route = &r;
      if (req.method == "OPTIONS" && !cfg_.cors_origin.empty()) {
        res.status = 204;
        res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        res.set_header("Access-Control-Allow-Headers",
                       "Authorization, Content-Type, x-api-key, anthropic-version, "
                       "anthropic-beta, OpenAI-Organization, OpenAI-Project, x-stainless-*");
        res.set_header("Access-Control-Max-Age", "600");
      } else if (route) {
        route->handler(req, res);
      } else if (it != routes_.end()) {
        std::string allow;
        for (const Route& r : it->second) allow += (allow.empty() ? "" : ", ") + r.method;
        res.set_header("Allow", allow);
        send_error(res,
                   ApiError(405, "Method not allowed: " + req.method + " " + req.path +
                                     " (allowed: " + allow + ")"),
                   flavor_of(req.path));
        metrics_.request_done("other", 405);
      } else {
        send_error(res, ApiError(404, "Not found: " + req.method + " " + req.path),
                   flavor_of(req.path));
        metrics_.request_done("other", 404);
      }
    }
  } catch (const std::exception& e) {
    res = HttpResponse{};
    send_error(res, ApiError(500, std::string("internal error: ") + e.what()), flavor_of(req.path));
  }
  res.set_header("X-Request-Id", req.id);
  // one origin per response: the one that asked, when it is allowed
  if (cfg_.cors_origin == "*") {
    res.set_header("Access-Control-Allow-Origin", "*");
  } else if (!cfg_.cors_origin.empty()) {
    const std::string& origin = req.header("origin");
    if (!origin.empty() && cors_allows(cfg_.cors_origin, origin))
      res.set_header("Access-Control-Allow-Origin", origin);
    res.set_header("Vary", "Origin");
  }
  if (res.self_logged) return;
  RequestRecord rec = record_of(req);
  rec.status = res.status;
  if (res.status >= 400) rec.reason = res.log_reason;
  log_.request(rec);
}

void HttpServer::routes() {
  add("GET", "/", [](const HttpRequest&, HttpResponse& res) {
    res.set_header("Content-Security-Policy",
                   "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'");
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_content(std::string(webui_index_html()), "text/html; charset=utf-8");
  });
  add("GET", "/health", [this](const HttpRequest&, HttpResponse& res) {
    if (!ready_.load(std::memory_order_acquire)) {
      send_json(res, 503, {{"status", "loading"}, {"model", cfg_.model_name}});
      return;
    }
    // a model split over MPI ranks whose exchange failed: every completion fails (the server
    // stays up to say so)
    if (const std::string err = engine().model().stage_error(); !err.empty()) {
      send_json(res, 503, {{"status", "error"}, {"model", cfg_.model_name}, {"error", err}});
      return;
    }
    send_json(res, 200,
              {{"status", "ok"},
               {"model", cfg_.model_name},
               {"active", scheduler().active()},
               {"queued", scheduler().queued()},
               {"ctx_size", scheduler().ctx_size()},
               {"kv_reserved_bytes", scheduler().kv_used()},
               {"kv_pool_bytes", scheduler().kv_capacity()},
               {"prefix_cache", cfg_.prefix_cache}});
  });
  add("GET", "/metrics", [this](const HttpRequest&, HttpResponse& res) {
    metrics_.set_queue(scheduler().queued(), scheduler().active());
    metrics_.set_kv(scheduler().kv_used(), scheduler().kv_capacity());
    metrics_.set_batch(engine().batcher_stats());
    metrics_.set_log_dropped(log_.dropped());
    metrics_.set_images(images_->stats());
    res.set_content(metrics_.prometheus(), "text/plain; version=0.0.4");
  });
  for (const char* p : {"/v1/models", "/models"})
    add("GET", p, [this](const HttpRequest&, HttpResponse& res) {
      send_json(res, 200,
                models_body(cfg_.model_name, scheduler().ctx_size(),
                            engine().config().max_position_embeddings));
    });
  add("GET", "/props",
      [this](const HttpRequest&, HttpResponse& res) { send_json(res, 200, props_body(*ctx_)); });
  add("GET", "/version",
      [this](const HttpRequest&, HttpResponse& res) { send_json(res, 200, version_body(*ctx_)); });
  add("GET", "/slots",
      [this](const HttpRequest&, HttpResponse& res) { send_json(res, 200, slots_body(*ctx_)); });
  // (light routes: a tokenizer pass over at most --max-body bytes)
  auto tokenizer_route = [this](ojson (*body)(const runtime::Engine&, const ojson&)) {
    return [this, body](const HttpRequest& req, HttpResponse& res) {
      try {
        send_json(res, 200, body(engine(), parse_body(req.body)));
      } catch (const ApiError& e) {
        send_error(res, e, ApiFlavor::kOpenAI);
      }
    };
  };
  add("POST", "/tokenize", tokenizer_route(tokenize_body));
  add("POST", "/detokenize", tokenizer_route(detokenize_body));
  auto generation = [this](ApiEndpoint ep) {
    return [this, ep](const HttpRequest& req, HttpResponse& res) { generate(ep, req, res); };
  };
  for (const char* p : {"/v1/chat/completions", "/chat/completions", "/beta/chat/completions",
                        "/beta/v1/chat/completions"})
    add("POST", p, generation(ApiEndpoint::kChat), true);
  for (const char* p :
       {"/v1/completions", "/completions", "/beta/completions", "/beta/v1/completions"})
    add("POST", p, generation(ApiEndpoint::kCompletion), true);
  for (const char* p : {"/v1/responses", "/responses"})
    add("POST", p, generation(ApiEndpoint::kResponses), true);
  for (const char* p : {"/anthropic/v1/messages", "/v1/messages"})
    add("POST", p, generation(ApiEndpoint::kAnthropic), true);
  for (const char* p : {"/anthropic/v1/messages/count_tokens", "/v1/messages/count_tokens"})
    add(  // heavy: its images wait for the pixel budget as a generation's do
        "POST", p, [this](const HttpRequest& req, HttpResponse& res) { count_tokens(req, res); },
        true);
}

namespace {

// The server's context for one request: its images stop decoding when its client leaves.
ApiContext for_request(const ApiContext& server, const HttpRequest& req) {
  ApiContext ctx = server;
  ctx.client_gone = [&req] { return req.client_gone(); };
  return ctx;
}

// The job and the answer's format of a generation request.
PreparedRequest prepare(const ApiContext& ctx, ApiEndpoint ep, const ojson& body, Streaming& st,
                        const std::function<void(const std::string&)>& warn) {
  PreparedRequest p;
  switch (ep) {
    case ApiEndpoint::kChat: {
      const std::string id = new_id("chatcmpl-");
      warn_ignored_fields(body, RequestApi::kChat, warn);
      p = prepare_chat(ctx, apply_chat_aliases(body), id, "call_" + id.substr(9) + "_", {}, warn);
      st.fmt = std::make_unique<ChatCompletionFormat>(
          p.id, p.model, p.created, p.spec.setup.parser.start == text::GenerationStart::kReasoning,
          p.opts.include_usage, p.opts.logprobs);
      break;
    }
    case ApiEndpoint::kCompletion:
      p = prepare_completion(ctx, body, new_id("cmpl-"));
      st.fmt = std::make_unique<CompletionFormat>(p.id, p.model, p.created, p.opts.include_usage,
                                                  p.opts.logprobs);
      break;
    case ApiEndpoint::kResponses: {
      const std::string id = new_id("resp_");
      warn_ignored_fields(body, RequestApi::kResponses, warn);
      const ResponsesRequest r = responses_to_chat(body, warn);
      p = prepare_chat(ctx, r.chat, id, "call_" + id.substr(5) + "_", {}, warn);
      st.fmt = std::make_unique<ResponsesFormat>(p.id, p.model, p.created, body, r);
      break;
    }
    case ApiEndpoint::kAnthropic: {
      const std::string id = new_id("msg_");
      warn_ignored_fields(body, RequestApi::kAnthropic, warn);
      p = prepare_chat(ctx, anthropic_to_chat(body, warn), id, "toolu_" + id.substr(4) + "_", {},
                       warn);
      st.fmt = std::make_unique<AnthropicFormat>(p.id, p.model);
      break;
    }
  }
  return p;
}

}  // namespace

void HttpServer::generate(ApiEndpoint ep, const HttpRequest& req, HttpResponse& res) {
  const ApiFlavor flavor =
      ep == ApiEndpoint::kAnthropic ? ApiFlavor::kAnthropic : ApiFlavor::kOpenAI;
  try {
    const ojson body = parse_body(req.body);
    auto st = std::make_shared<Streaming>();
    st->keepalive = std::chrono::milliseconds(std::max(50, cfg_.keepalive_ms));
    if (cfg_.request_timeout_s > 0) {
      st->deadline = Clock::now() + std::chrono::seconds(cfg_.request_timeout_s);
      st->deadline_error = "the request ran past the server's deadline of " +
                           std::to_string(cfg_.request_timeout_s) + " s (--request-timeout)";
    }
    PreparedRequest p = prepare(for_request(*ctx_, req), ep, body, *st,
                                [this](const std::string& m) { log_.warn(m); });
    st->stream = p.opts.stream;
    st->job = std::make_shared<Job>(std::move(p.spec));
    scheduler().submit(st->job);
    RequestRecord rec = record_of(req);
    st->on_end = [this, rec](const Streaming& s, bool completed) {
      // A client that left: its job stops at its next step; the line is logged then, with the
      // tokens it really ran (the scheduler outlives this server's open jobs).
      s.job->when_done([this, rec, completed, job = s.job.get()](const Outcome& o) mutable {
        rec.status = o.finish == Finish::kError ? 500 : 200;
        if (o.finish == Finish::kError) rec.reason = o.error;
        rec.seconds = job->seconds_to_done();
        rec.ttft_seconds = job->seconds_to_first_token();
        rec.prompt_tokens = o.usage.prompt_tokens;
        rec.cached_tokens = o.usage.cached_tokens;
        rec.completion_tokens = o.usage.completion_tokens;
        rec.finish = completed ? openai_finish_reason(o.finish) : "client-gone";
        if (completed && rec.status == 200)
          metrics_.observe_generation(rec.seconds, rec.ttft_seconds);
        log_.request(rec);
      });
    };
    res.self_logged = true;
    serve_job(req, res, st);
  } catch (const ApiError& e) {
    if (e.status() == 503) res.set_header("Retry-After", "2");  // full queue, KV pool, stopping
    send_error(res, e, flavor);
  } catch (const text::RequestError& e) {
    send_error(res, ApiError::from(e), flavor);
  } catch (const std::exception& e) {
    send_error(res, ApiError(500, std::string("internal error: ") + e.what()), flavor);
  }
  metrics_.request_done(endpoint_name(int(ep)), res.status);
}

void HttpServer::count_tokens(const HttpRequest& req, HttpResponse& res) {
  try {
    ojson b = parse_body(req.body);
    if (!b.contains("max_tokens")) b["max_tokens"] = 1;  // not needed to count
    ojson chat = anthropic_to_chat(b);
    (void)request_model(chat, cfg_.model_name);
    JobSpec spec;  // the images as /v1/messages decodes and counts them
    const runtime::Prompt p =
        render_chat_prompt(for_request(*ctx_, req), text::parse_chat_request(chat), &spec);
    send_json(res, 200, {{"input_tokens", int64_t(p.ids.size())}});
  } catch (const ApiError& e) {
    if (e.status() == 503) res.set_header("Retry-After", "2");  // the image budget, stopping
    send_error(res, e, ApiFlavor::kAnthropic);
  } catch (const text::RequestError& e) {
    send_error(res, ApiError::from(e), ApiFlavor::kAnthropic);
  } catch (const std::exception& e) {
    send_error(res, ApiError(400, std::string("cannot count tokens: ") + e.what()),
               ApiFlavor::kAnthropic);
  }
  metrics_.request_done("count_tokens", res.status);
}

}  // namespace cedar::server
