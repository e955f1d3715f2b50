// `cedar serve -m DIR [--host 127.0.0.1] [--port 8080] [--api-key KEY] [--parallel N]
// [--ctx-size N] [-t T] ...`: the OpenAI- and Anthropic-compatible HTTP API (docs/SERVER.md).
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "app/commands.h"
#include "app/load_model.h"
#include "app/ranks.h"
#include "app/sampling_flags.h"
#include "base/args.h"
#include "model/param_count.h"
#include "runtime/engine.h"
#include "runtime/prefix_cache.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/scheduler.h"

namespace cedar::app {

namespace {

bool is_loopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// How long a shutdown after SIGTERM/SIGINT may take before the process ends regardless.
constexpr int kShutdownSeconds = 10;

long long positive(const Args& a, const std::string& name, long long def, long long max) {
  const long long v = a.get_int(name, def);
  if (v < 0 || v > max)
    throw UsageError("--" + name + " must be in [0, " + std::to_string(max) + "], got " +
                     std::to_string(v));
  return v;
}

// A problem with a flag's value that a parser reports as std::runtime_error: a usage error.
template <class F>
auto flag_value(F&& parse) {
  try {
    return parse();
  } catch (const UsageError&) {
    throw;
  } catch (const std::exception& e) {
    throw UsageError(e.what());
  }
}

// A model path that is not there fails before the port is bound (the load says more about a
// path that is there but wrong).
void check_model_path(const std::string& path) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st))
    throw std::runtime_error("model " + path + ": no such file or directory");
  if (std::filesystem::is_directory(st) &&
      !std::filesystem::exists(std::filesystem::path(path) / "config.json"))
    throw std::runtime_error("model " + path +
                             ": no config.json in this directory (a model directory in the "
                             "release layout, or a GGUF file)");
}

// A size or count for which 0 means nothing useful (a zero body limit, chunk, thread count):
// 0 stands for the default, as an absent flag does.
long long count_or_default(const Args& a, const std::string& name, long long def, long long max) {
  const long long v = positive(a, name, def, max);
  return v == 0 ? def : v;
}

// printf into a std::string
template <class... A>
std::string fmt(const char* f, A... a) {
  char buf[512];
  std::snprintf(buf, sizeof buf, f, a...);
  return buf;
}

// The start-up banner: what is served, how, and with what memory.
std::vector<std::string> banner(const runtime::Engine& e, const server::ServerConfig& cfg,
                                const server::Scheduler& sched, bool cache, int parallel) {
  const ModelConfig& mc = e.config();
  size_t weight_bytes = 0;
  for (const auto& [name, t] : e.checkpoint().tensors()) weight_bytes += t.nbytes;
  const ParamCounts pc = count_params(mc, expected_tensors(mc));
  std::vector<std::string> lines;
  lines.push_back("cedar " + version_string() + ", model " + e.options().model_dir);
  lines.push_back(fmt(
      "%.2fB parameters (%.2fB active per generated token), %d layers, %.2f GiB of weights "
      "mapped%s",
      double(pc.total()) * 1e-9, double(pc.active_generated) * 1e-9, mc.num_hidden_layers,
      double(weight_bytes) / double(1ull << 30),
      e.model().head().requantized() ? ", the head requantized to 8 bits (--head-type q8)" : ""));
  lines.push_back(
      fmt("context %lld per request, %d slots, %d forward threads, prefix cache %s, API key %s, "
          "request log %s",
          static_cast<long long>(sched.ctx_size()), parallel, e.threads(), cache ? "on" : "off",
          cfg.api_key.empty() ? "none" : "set",
          cfg.log_format == server::LogFormat::kJson ? "json" : "text"));
  lines.push_back(describe_kernels(e.kernels()));
  lines.push_back(
      fmt("a request that sets none gets temperature %g, top-p %g, top-k %d, min-p %g (%s), "
          "max_tokens %lld",
          cfg.sampling.temperature, cfg.sampling.top_p, cfg.sampling.top_k, cfg.sampling.min_p,
          cfg.sampling_source.empty() ? "built in" : cfg.sampling_source.c_str(),
          static_cast<long long>(cfg.default_max_tokens)));
  const runtime::MemoryPlan& p = e.memory_plan();
  if (p.budget > 0)
    lines.push_back(
        "memory plan " + runtime::format_bytes(p.resident()) + " of --mem-budget " +
        runtime::format_bytes(p.budget) + " (KV " + runtime::format_bytes(p.kv) +
        (p.kv_shared ? " shared by the slots" : " reserved") + "); routed experts " +
        (p.streamed ? "streamed through " + runtime::format_bytes(p.expert_cache) : "mapped") +
        ", Engram tables " +
        (p.engram_tables == 0 ? "none"
         : p.engram_streamed  ? "read by row"
                              : "mapped"));
  return lines;
}

}  // namespace

int cmd_serve(int argc, char** argv) {
  Args args(
      "serve",
      with_rank_options(with_sampling_options(
          {{"model", "m", true,
            "model directory or GGUF file (default: the embedded default model)"},
           {"host", "", true, "address to listen on (default 127.0.0.1)"},
           {"port", "", true, "port (default 8080; 0: any free port, printed on start)"},
           {"api-key", "", true,
            "require this key (Authorization: Bearer / x-api-key); default: none"},
           {"parallel", "np", true,
            "requests generated concurrently, decoded together in batched passes (default 8)"},
           {"ctx-size", "c", true,
            "context limit per request, prompt + completion (default and 0: the model's; more "
            "than the model's is an error)"},
           {"threads", "t", true, "worker threads for the forward (default: all cores)"},
           {"model-name", "", true, "model id reported by /v1/models (default deepseek-v4-flash)"},
           {"alias", "a", true, "the same as --model-name (llama-server's name)"},
           {"prefill-chunk", "", true, "prompt tokens per forward call of a prefill (default 128)"},
           {"batch-rows", "", true, "token rows per batched forward pass (default 512)"},
           {"max-queue", "", true,
            "requests that may wait for a free slot before 503 overloaded (default 256; 0: none "
            "wait)"},
           {"max-body", "", true, "request body limit in bytes (default 16777216)"},
           {"max-tokens", "", true,
            "max_tokens of a request that sets none (default 32768; 0: until the context is full)"},
           {"n-predict", "n", true, "the same as --max-tokens (llama-server's name)"},
           {"keepalive-ms", "", true, "SSE keep-alive period in ms (default 2000)"},
           {"request-timeout", "", true,
            "end a generation that runs longer than this many seconds, as an error (default "
            "0: no limit)"},
           {"log-format", "", true,
            "request log on stderr: text (default) or json (one object a line)"},
           {"cors", "", true,
            "allow browser calls from these origins, comma-separated (\"*\": any; default: "
            "none, and cross-origin requests are refused)"},
           {"allowed-hosts", "", true,
            "Host names to answer besides loopback names and IP addresses, comma-separated "
            "(\"*\": any; default: none)"},
           {"http-threads", "", true,
            "threads that run generation requests (default max(256, 4*parallel+16))"},
           {"image-budget", "", true,
            "image memory in flight, in megapixels of RGB (2^20 pixels, 3 bytes each): images "
            "being decoded and patches waiting for the tower (default 128)"},
           {"image-threads", "", true, "threads that decode images (default 2)"},
           {"kernels", "", true, kKernelsHelp},
           {"head-type", "", true, kHeadTypeHelp},
           {"gguf-requant", "", false, kGgufRequantHelp},
           {"tokenizer", "", true, "tokenizer.json (default <model>/tokenizer.json)"},
           {"cache-ram", "", true, "prefix cache memory budget in MiB (default 2048; 0: off)"},
           {"cache-dir", "", true, "prefix cache disk directory (default: no disk tier)"},
           {"cache-disk", "", true, "prefix cache disk budget in MiB (default 16384)"},
           {"cache-interval", "", true, "disk unit every N prompt tokens (default 1024)"},
           {"no-cache", "", false, "no prefix cache (slots still reuse their own state)"},
           {"mem-budget", "", true, kMemBudgetHelp},
           {"kv-ram", "", true, kKvRamHelp},
           {"no-prefetch", "", false,
            "do not read the weights in before serving (pages load as they are used)"},
           {"speculative", "", true,
            "off | dspark: speculative decoding with the model's DSpark drafter (default: dspark "
            "when the model has one)"},
           {"spec-tokens", "", true, "drafted tokens verified per pass (default 5)"},
           {"spec-confidence", "", true,
            "verify drafts only up to the first with confidence below P (default 0)"},
           {"spec-always", "", false,
            "verify on every step even where passes emit fewer tokens per second than plain steps "
            "(default: speculation pauses while it does not pay)"},
           {"enable-test-hooks", "", false,
            "honour the cedar_test_output request field (tests only; docs/SERVER.md)"}})));
  args.parse(argc, argv, "CEDAR_");  // every flag also as $CEDAR_<NAME> (under argv)
  if (args.help_requested()) {
    std::printf("%s", args.usage().c_str());
    return 0;
  }
  if (!args.positional().empty())
    throw UsageError("unexpected argument '" + args.positional().front() + "'");
  // two names for one setting: one on the command line (which wins over the environment's)
  auto named = [&](const char* a, const char* b) {
    const bool argv_a = args.has(a) && !args.from_env(a), argv_b = args.has(b) && !args.from_env(b);
    if (argv_a && argv_b)
      throw UsageError(std::string("give one of --") + a + " and --" + b + " (the same setting)");
    return argv_b || (!argv_a && !args.has(a) && args.has(b)) ? b : a;
  };
  const char* model_name_flag = named("model-name", "alias");
  const char* max_tokens_flag = named("max-tokens", "n-predict");
  const std::string host = args.get("host", "127.0.0.1");
  const int port = int(positive(args, "port", 8080, 65535));
  const int parallel = int(count_or_default(args, "parallel", 8, 1024));

  server::ServerConfig cfg;
  cfg.model_name = args.get(model_name_flag, cfg.model_name);
  if (cfg.model_name.empty()) throw UsageError("--model-name must not be empty");
  cfg.api_key = args.get("api-key", "");
  cfg.test_hooks = args.has("enable-test-hooks");
  cfg.keepalive_ms = int(count_or_default(args, "keepalive-ms", 2000, 600000));
  cfg.request_timeout_s = positive(args, "request-timeout", 0, 1ll << 31);
  cfg.max_body_bytes = size_t(count_or_default(args, "max-body", 16ll << 20, 1ll << 34));
  cfg.default_max_tokens = positive(args, max_tokens_flag, runtime::kDefaultMaxTokens, 1ll << 40);
  cfg.log_format =
      flag_value([&] { return server::parse_log_format(args.get("log-format", "text")); });
  cfg.cors_origin = args.get("cors", "");
  if (args.has("allowed-hosts"))
    cfg.allowed_hosts =
        flag_value([&] { return server::parse_allowed_hosts(args.get("allowed-hosts", "")); });
  cfg.images.pixel_budget =
      count_or_default(args, "image-budget", cfg.images.pixel_budget >> 20, 1 << 20) << 20;
  cfg.images.threads = int(count_or_default(args, "image-threads", cfg.images.threads, 256));
  // --ranks: rank 0 serves HTTP; the other ranks load the model and serve their layers
  auto ranks = Ranks::join(args);
  const bool front = !ranks || ranks->rank() == 0;
  // A prefix cache restore rebuilds the window by bounded replay, which does not run across
  // ranks: under --ranks the cache is off unless asked for, and refused when it is.
  if (ranks && (args.get("speculative", "") == "dspark" || args.has("cache-dir") ||
                (args.has("cache-ram") && positive(args, "cache-ram", 0, 1ll << 30) > 0)))
    throw UsageError(
        "--ranks: --speculative dspark and the prefix cache (--cache-ram, --cache-dir: its "
        "restores rebuild the window by replay) need one process");

  // The engine and scheduler flags, checked before the port is bound.
  runtime::EngineOptions eo;
  eo.model_dir = model_dir_or_default(args);
  eo.threads = flag_value([&] { return threads_option(args, "cedar serve"); });
  eo.kernels = args.get("kernels", "");
  flag_value([&] { return &choose_kernels(eo.kernels); });
  eo.gguf_requant = args.has("gguf-requant");
  eo.head_type = flag_value([&] { return parse_head_type(args.get("head-type", "stored")); });
  eo.tokenizer_path = args.get("tokenizer", "");
  cfg.model_path = eo.model_dir;
  cfg.version = version_string();
  const SamplingDefaults sd =
      flag_value([&] { return sampling_defaults(args, eo.model_dir, "cedar serve"); });
  cfg.sampling.temperature = sd.temperature;
  cfg.sampling.top_p = sd.top_p;
  cfg.sampling.top_k = sd.top_k;
  cfg.sampling.min_p = sd.min_p;
  cfg.sampling_source = sd.from;
  server::SchedulerOptions so;
  so.parallel = parallel;
  so.ctx_size = positive(args, "ctx-size", 0, 1ll << 40);
  so.prefill_chunk = count_or_default(args, "prefill-chunk", 128, 1 << 20);
  so.max_queue = int(positive(args, "max-queue", 256, 1 << 20));
  so.batch_rows = int(count_or_default(args, "batch-rows", 512, 1 << 20));
  const std::string spec = args.get("speculative", "");
  if (!spec.empty() && spec != "off" && spec != "dspark")
    throw UsageError("--speculative must be off or dspark, got '" + spec + "'");
  so.speculative.spec_tokens = int(positive(args, "spec-tokens", 0, 64));
  so.speculative.min_confidence = args.get_double("spec-confidence", 0.0);
  so.speculative.payoff_gate = !args.has("spec-always");
  if (!(so.speculative.min_confidence >= 0.0 && so.speculative.min_confidence < 1.0))
    throw UsageError("--spec-confidence must be in [0, 1)");
  const long long cache_ram = positive(args, "cache-ram", 2048, 1ll << 30);
  const bool use_cache =
      !ranks && !args.has("no-cache") && (cache_ram > 0 || args.has("cache-dir"));
  runtime::PrefixCacheOptions co;
  co.memory_bytes = uint64_t(cache_ram) << 20;
  co.disk_dir = args.get("cache-dir", "");
  co.disk_bytes = uint64_t(positive(args, "cache-disk", 16384, 1ll << 30)) << 20;
  co.interval = count_or_default(args, "cache-interval", 1024, 1ll << 30);
  eo.memory = flag_value([&] {
    return memory_request(args, parallel, so.ctx_size, use_cache ? cache_ram << 20 : 0,
                          so.batch_rows);
  });
  (void)positive(args, "http-threads", 0, 4096);
  check_model_path(eo.model_dir);  // (a runtime error, status 1, but before the port is bound)

  // Signals are taken by one thread (sigwait) so that shutdown runs outside a signal handler.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);  // a client that disconnects must not kill the server
  // Every open connection is a descriptor: take the hard limit (Debian's soft default is 1024).
  rlimit nofile{};
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = std::min<rlim_t>(nofile.rlim_max, 1 << 16);
    setrlimit(RLIMIT_NOFILE, &nofile);
  }

  // Bound before the model loads (a port in use fails at once); until attach() every route
  // answers 503 "loading", so a supervisor's health check sees the server come up.
  server::Metrics metrics;
  const int http_threads =
      int(count_or_default(args, "http-threads", std::max(256, 4 * parallel + 16), 4096));
  server::HttpServer http(metrics, cfg, http_threads);
  // What the server says as it starts: stdout as text, or with --log-format json one JSON object
  // a line on the log's stream (stderr), so that a log collector reads one stream of JSON.
  const bool json_log = cfg.log_format == server::LogFormat::kJson;
  auto say = [&](const std::string& line, bool warning = false) {
    if (json_log) {
      warning ? http.log_warn("cedar serve: " + line) : http.log_info("cedar serve: " + line);
    } else {
      std::fprintf(warning ? stderr : stdout, "cedar serve: %s%s\n", warning ? "warning: " : "",
                   line.c_str());
      std::fflush(warning ? stderr : stdout);
    }
  };
  if (!is_loopback(host) && cfg.api_key.empty())
    say("listening on " + host + " without --api-key", true);
  if (cfg.test_hooks) say("test hooks enabled (cedar_test_output); not for production", true);
  const int bound = front ? http.bind(host, port) : 0;
  const std::string& model_dir = eo.model_dir;
  say("bound http://" + host + ":" + std::to_string(bound) + ", loading " + model_dir);
  bool listen_ok = true;
  std::thread listener;
  if (front) listener = std::thread([&] { listen_ok = http.listen(); });
  std::atomic<server::Scheduler*> running{nullptr};
  std::atomic<bool> stopping{false}, exiting{false};
  std::thread sig_thread([&] {
    int sig = 0;
    sigwait(&sigs, &sig);
    if (exiting) return;  // woken by Shutdown below, not by a signal from outside
    // The shutdown waits for the forward step in flight; a step that does not return, or a
    // stderr nobody reads, must not keep the process alive: it ends within kShutdownSeconds
    // whatever happens, and at once on a second signal.
    std::thread([sigs] {
      const timespec bound{kShutdownSeconds, 0};
      const int again = sigtimedwait(&sigs, nullptr, &bound);
      _exit(again > 0 ? 128 + again : 1);
    }).detach();
    http.log_info("cedar serve: signal " + std::to_string(sig) + ", shutting down");
    stopping = true;
    // Cancel the generations first: the HTTP server waits for its open responses to end.
    if (server::Scheduler* s = running.load()) s->stop();
    http.stop();
  });
  // Ends the listener and the signal thread (on every exit path).
  struct Shutdown {
    server::HttpServer& http;
    std::thread& listener;
    std::thread& sig;
    std::atomic<bool>& exiting;
    ~Shutdown() {
      http.stop();
      if (listener.joinable()) listener.join();
      exiting = true;
      pthread_kill(sig.native_handle(), SIGTERM);
      sig.join();
    }
  } shutdown{http, listener, sig_thread, exiting};

  // a rank reads its layers' pages as it uses them, not the whole checkpoint
  auto engine = load_engine(eo, "cedar serve", !args.has("no-prefetch") && !ranks,
                            [&](const std::string& m) { say(m); });
  if (ranks) {
    ranks->check(args, model_dir, engine->checkpoint(), engine->kernels(), version_string());
    if (!ranks->attach(*engine)) return 0;  // another rank: served its layers until rank 0 ended
    say(ranks->describe(engine->config()));
  }
  if (engine->memory_plan().kv_shared) so.kv_pool = engine->memory_plan().kv;

  const bool drafter = engine->model().dspark() != nullptr;
  if (spec == "dspark" && !drafter)
    throw std::runtime_error("--speculative dspark: " + model_dir + " has no DSpark stages");
  so.speculative.enabled = spec.empty() ? drafter && !ranks : spec == "dspark";
  // The prefix cache (docs/PREFIX_CACHE.md), shared by all slots; hits are reported as
  // prompt_cache_hit_tokens.
  std::unique_ptr<runtime::PrefixCache> cache;
  if (use_cache) cache = std::make_unique<runtime::PrefixCache>(*engine, co);
  server::Scheduler scheduler(*engine, cache.get(), so, &metrics);
  if (stopping) return 0;  // a signal during the load
  running = &scheduler;
  http.attach(*engine, scheduler, cache != nullptr);
  for (const std::string& line : banner(*engine, cfg, scheduler, cache != nullptr, parallel))
    say(line);
  say(fmt("listening on http://%s:%d (model %s, %d slots, ctx %lld, %d threads, prefix cache %s)",
          host.c_str(), bound, cfg.model_name.c_str(), parallel,
          static_cast<long long>(scheduler.ctx_size()), engine->threads(), cache ? "on" : "off"));
  listener.join();  // until a signal stops the server (or the socket fails)
  scheduler.stop();
  running = nullptr;
  return listen_ok ? 0 : 1;
}

}  // namespace cedar::app
