// `cedar run -m DIR -p TEXT` (one shot, streamed) and `cedar run -m DIR` (interactive multi-turn
// chat on stdin) with llama.cpp-style flags; docs/RUNNING.md.
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "app/commands.h"
#include "app/line_reader.h"
#include "app/load_model.h"
#include "app/ranks.h"
#include "app/read_file.h"
#include "base/args.h"
#include "base/progress.h"
#include "runtime/engine.h"
#include "runtime/generator.h"
#include "runtime/prefix_cache.h"
#include "runtime/prompt_images.h"
#include "text/chat_request.h"

namespace cedar::app {

namespace {

using runtime::Engine;
using runtime::GenerationOptions;
using runtime::GenerationResult;
using runtime::Generator;
using text::ojson;
using text::ParseEvent;

// A bad flag or value: exit status 2 (a usage error), unlike runtime failures (1).
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::atomic<bool> g_interrupt{false};
extern "C" void on_sigint(int) { g_interrupt.store(true); }

// Streams parser events to stdout: reasoning dimmed on a terminal (or between <think> lines when
// piped), then the content; tool calls as "[tool call NAME] ARGS".
class Printer {
 public:
  explicit Printer(bool tty) : tty_(tty) {}

  void event(const ParseEvent& e) {
    switch (e.kind) {
      case ParseEvent::Kind::kReasoningDelta:
        if (!in_reasoning_) {
          std::fputs(tty_ ? "\x1b[2m" : "<think>\n", stdout);
          in_reasoning_ = true;
        }
        put(e.text);
        break;
      case ParseEvent::Kind::kContentDelta:
        end_reasoning();
        put(e.text);
        break;
      case ParseEvent::Kind::kToolCallBegin:
        end_reasoning();
        std::fprintf(stdout, "%s[tool call %s] ", at_line_start_ ? "" : "\n", e.name.c_str());
        at_line_start_ = false;
        break;
      case ParseEvent::Kind::kToolCallArguments:
        put(e.text);
        break;
      case ParseEvent::Kind::kToolCallEnd:
        put("\n");
        break;
    }
    std::fflush(stdout);
  }

  void finish() {
    end_reasoning();
    if (!at_line_start_) put("\n");
    std::fflush(stdout);
  }

 private:
  void put(const std::string& s) {
    if (s.empty()) return;
    std::fwrite(s.data(), 1, s.size(), stdout);
    at_line_start_ = s.back() == '\n';
  }
  void end_reasoning() {
    if (!in_reasoning_) return;
    in_reasoning_ = false;
    if (tty_) {
      std::fputs("\x1b[0m", stdout);
      if (!at_line_start_) put("\n");
    } else {
      put(at_line_start_ ? "</think>\n" : "\n</think>\n");
    }
  }

  bool tty_;
  bool in_reasoning_ = false;
  bool at_line_start_ = true;
};

void print_stats(const GenerationResult& r, const runtime::PrefixCache* cache) {
  const double pf = r.prefill_seconds > 0 ? double(r.prefill_computed) / r.prefill_seconds : 0.0;
  const double dc =
      r.decode_seconds > 0 ? double(r.usage.completion_tokens) / r.decode_seconds : 0.0;
  std::fprintf(stderr,
               "cedar run: prompt %lld tokens (%lld cached), prefill %.1f tok/s, decode %.1f "
               "tok/s, %lld tokens, finish %s\n",
               (long long)r.usage.prompt_tokens, (long long)r.usage.cached_tokens, pf, dc,
               (long long)r.usage.completion_tokens, runtime::finish_reason_name(r.finish));
  if (cache != nullptr) {
    const runtime::RestoreInfo ri = cache->last_restore();
    if (ri.source != runtime::RestoreInfo::Source::kNone && ri.tokens > 0)
      std::fprintf(stderr, "cedar run: prefix cache hit (%s): %lld tokens%s, %.3f s\n",
                   runtime::source_name(ri.source), (long long)ri.tokens,
                   ri.replayed ? ", window rebuilt by bounded replay" : "", ri.seconds);
  }
}

long long int_flag(const Args& a, const char* name, long long def, long long lo, long long hi,
                   const char* range) {
  long long v;
  try {
    v = a.get_int(name, def);
  } catch (const std::exception& e) {
    throw UsageError(e.what());
  }
  if (v < lo || v > hi)
    throw UsageError(std::string("option --") + name + " must be " + range + ", got " +
                     a.get(name));
  return v;
}

double num_flag(const Args& a, const char* name, double def, double lo, double hi,
                const char* range) {
  double v;
  try {
    v = a.get_double(name, def);
  } catch (const std::exception& e) {
    throw UsageError(e.what());
  }
  if (!std::isfinite(v) || v < lo || v > hi)
    throw UsageError(std::string("option --") + name + " must be " + range + ", got " +
                     a.get(name));
  return v;
}

struct RunConfig {
  runtime::EngineOptions engine;
  GenerationOptions gen;
  bool interactive = true;
  std::string prompt;
  std::string system;
  bool raw = false;
  bool thinking = true;
  int effort = 75;
  std::string cache_dir;  // "": no prefix cache
  runtime::PrefixCacheOptions cache;
  bool prefetch = true;              // read the weights in after loading (load_model.h)
  std::string speculative;           // "", "off" or "dspark" ("": dspark when the model has stages)
  std::vector<std::string> images;   // --image files, in order
  std::shared_ptr<const Args> args;  // the parsed options (--ranks: app/ranks.h reads them)
};

// Parses the flags; every problem is a UsageError. Returns false for --help (usage printed).
bool parse_flags(int argc, char** argv, RunConfig* rc) {
  // --stop and --image are repeatable, which Args does not do: take them out first.
  std::vector<std::string> stops;
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    std::vector<std::string>* to = nullptr;
    std::string name;
    for (auto [n, v] : {std::pair{"--stop", &stops}, std::pair{"--image", &rc->images}})
      if (i > 0 && (a == n || a.rfind(std::string(n) + "=", 0) == 0)) to = v, name = n;
    if (!to) {
      rest.push_back(argv[i]);
    } else if (a == name) {
      if (i + 1 >= argc) throw UsageError("option " + name + " needs a value");
      to->push_back(argv[++i]);
    } else {
      to->push_back(a.substr(name.size() + 1));
    }
  }
  for (const auto& f : rc->images)
    if (f.empty()) throw UsageError("option --image: the file name must not be empty");
  for (const auto& s : stops)
    if (s.empty()) throw UsageError("option --stop: the stop string must not be empty");

  Args args("run",
            with_rank_options(
                {{"model", "m", true,
                  "model directory or GGUF file (default: the embedded default model)"},
                 {"prompt", "p", true, "one-shot prompt (absent: interactive chat on stdin)"},
                 {"file", "f", true, "one-shot prompt read from a file"},
                 {"n-predict", "n", true, "max completion tokens (default 256; -1: until ctx)"},
                 {"ctx-size", "c", true, "context size, prompt + completion (default: model)"},
                 {"threads", "t", true, "worker threads (default: all cores)"},
                 {"temp", "", true, "temperature (default 0.8; 0 = greedy)"},
                 {"top-k", "", true, "top-k (default 40; 0 = off)"},
                 {"top-p", "", true, "top-p (default 0.95; 1 = off)"},
                 {"min-p", "", true, "min-p (default 0.05; 0 = off)"},
                 {"seed", "s", true, "sampling seed (default 0)"},
                 {"stop", "", true, "stop string (repeatable)"},
                 {"image", "", true,
                  "an image file (PNG, JPEG, WebP, GIF) before the prompt's text (repeatable; "
                  "one-shot prompts)"},
                 {"think", "", true, "thinking on with reasoning effort 1..100 (default 75)"},
                 {"nothink", "", false, "thinking off"},
                 {"system", "", true, "system message"},
                 {"raw", "", false, "plain-text prompt (BOS + BPE), unparsed output"},
                 {"exact-prefill", "", false, "every layer on every prompt row (default: CED)"},
                 {"chunk", "", true, "prefill chunk size in tokens (default 512)"},
                 {"cache-dir", "", true, "persistent prefix cache directory (default: none)"},
                 {"cache-interval", "", true, "cache a prompt unit every N tokens (1024)"},
                 {"cache-window", "", false, "cache units keep the window (exact restore)"},
                 {"mem-budget", "", true, kMemBudgetHelp},
                 {"no-prefetch", "", false,
                  "do not read the weights in ahead (pages load as they are used)"},
                 {"speculative", "", true,
                  "off | dspark: speculative decoding with the model's DSpark drafter, the "
                  "same tokens in fewer passes (default: dspark when the model has one)"},
                 {"spec-tokens", "", true, "drafted tokens verified per pass (default 5)"},
                 {"spec-confidence", "", true,
                  "verify drafts only up to the first with confidence below P (default 0)"},
                 {"spec-always", "", false,
                  "verify on every step even where passes emit fewer tokens per second than "
                  "plain steps (default: speculation pauses while it does not pay)"},
                 {"kernels", "", true, kKernelsHelp},
                 {"head-type", "", true, kHeadTypeHelp},
                 {"gguf-requant", "", false, kGgufRequantHelp}}));
  try {
    args.parse(int(rest.size()), rest.data());
  } catch (const std::exception& e) {
    throw UsageError(e.what());
  }
  if (args.help_requested()) {
    std::printf("%s", args.usage().c_str());
    return false;
  }
  if (!args.positional().empty())
    throw UsageError("unexpected argument '" + args.positional().front() +
                     "' (the prompt goes after -p)");
  rc->engine.model_dir = model_dir_or_default(args);
  // checked here first so that a bad value is a usage error (status 2); then lowered to the CPUs
  (void)int_flag(args, "threads", 0, 0, INT_MAX, "0 (every CPU) or a positive number");
  rc->engine.threads = threads_option(args, "cedar run");
  rc->engine.kernels = args.get("kernels", "");
  rc->engine.gguf_requant = args.has("gguf-requant");
  rc->engine.head_type = parse_head_type(args.get("head-type", "stored"));
  // a rank reads its layers' pages as it uses them, not the whole checkpoint
  rc->prefetch = !args.has("no-prefetch") && !args.has("ranks");
  try {
    (void)choose_kernels(rc->engine.kernels);
  } catch (const std::exception& e) {
    throw UsageError(std::string("option --kernels: ") + e.what());
  }

  if (args.has("prompt") && args.has("file")) throw UsageError("give only one of -p and -f");
  if (args.has("prompt")) {
    rc->interactive = false;
    rc->prompt = args.get("prompt");
  } else if (args.has("file")) {
    rc->interactive = false;
    std::ifstream in(args.get("file"), std::ios::binary);
    if (!in) throw UsageError("option --file " + args.get("file") + ": cannot open");
    std::stringstream ss;
    ss << in.rdbuf();
    rc->prompt = ss.str();
  }
  if (!rc->interactive && rc->prompt.empty()) throw UsageError("the prompt is empty");

  GenerationOptions& g = rc->gen;
  const long long n = int_flag(args, "n-predict", 256, -1, LLONG_MAX, "-1 or a positive integer");
  if (n == 0) throw UsageError("option --n-predict must be -1 or a positive integer, got 0");
  g.max_tokens = n;
  g.ctx_size = int_flag(args, "ctx-size", 0, 0, LLONG_MAX, ">= 0");
  g.sampling.temperature = num_flag(args, "temp", 0.8, 0.0, 1e6, ">= 0");
  g.sampling.top_k = int(int_flag(args, "top-k", 40, 0, INT_MAX, ">= 0"));
  g.sampling.top_p = num_flag(args, "top-p", 0.95, 0.0, 1.0, "in (0, 1]");
  if (g.sampling.top_p <= 0.0) throw UsageError("option --top-p must be in (0, 1], got 0");
  g.sampling.min_p = num_flag(args, "min-p", 0.05, 0.0, 1.0, "in [0, 1]");
  g.sampling.seed = uint64_t(int_flag(args, "seed", 0, 0, LLONG_MAX, ">= 0"));
  g.stop = stops;
  g.exact_prefill = args.has("exact-prefill");
  g.prefill_chunk = int_flag(args, "chunk", 512, 1, INT_MAX, "a positive integer");
  try {
    rc->engine.memory = memory_request(args, 1, g.ctx_size, 0, int(g.prefill_chunk));
  } catch (const std::exception& e) {
    throw UsageError(std::string("option ") + e.what());
  }
  rc->speculative = args.get("speculative");
  if (args.has("speculative") && rc->speculative != "off" && rc->speculative != "dspark")
    throw UsageError("option --speculative must be off or dspark, got '" + rc->speculative + "'");
  g.speculative.min_confidence = num_flag(args, "spec-confidence", 0.0, 0.0, 0.999, "in [0, 1)");
  g.speculative.payoff_gate = !args.has("spec-always");
  if (args.has("spec-tokens"))
    g.speculative.spec_tokens = int(int_flag(args, "spec-tokens", 5, 1, 64, "between 1 and 64"));

  rc->cache_dir = args.get("cache-dir");
  if (args.has("cache-dir") && rc->cache_dir.empty())
    throw UsageError("option --cache-dir is empty");
  if (!args.has("cache-dir") && (args.has("cache-interval") || args.has("cache-window")))
    throw UsageError("--cache-interval / --cache-window need --cache-dir");
  rc->cache.disk_dir = rc->cache_dir;
  rc->cache.interval = int_flag(args, "cache-interval", 1024, 0, LLONG_MAX, ">= 0");
  rc->cache.store_window = args.has("cache-window");
  rc->raw = args.has("raw");
  rc->system = args.get("system");
  if (args.has("think") && args.has("nothink"))
    throw UsageError("--think and --nothink exclude each other");
  rc->effort = int(int_flag(args, "think", 75, 1, 100, "between 1 and 100"));
  rc->thinking = !args.has("nothink");
  if (rc->raw && rc->interactive) throw UsageError("--raw needs a one-shot prompt (-p or -f)");
  if (!rc->images.empty() && (rc->raw || rc->interactive))
    throw UsageError("--image needs a one-shot chat prompt (-p or -f, not --raw)");
  if (rc->raw && (args.has("think") || args.has("nothink") || args.has("system")))
    throw UsageError("--raw prompts use no chat template (--think/--nothink/--system)");
  if (args.has("ranks") &&
      (rc->speculative == "dspark" || !rc->cache_dir.empty() || !rc->images.empty()))
    throw UsageError("--ranks runs text without --speculative dspark, --cache-dir or --image");
  rc->args = std::make_shared<const Args>(args);
  return true;
}

ojson chat_body(const ojson& messages, bool thinking, int effort) {
  ojson body = ojson::object();
  body["messages"] = messages;
  body["thinking"] = ojson{{"type", thinking ? "enabled" : "disabled"}};
  body["reasoning_effort"] = effort;
  return body;
}

GenerationResult run_turn(Generator& gen, const runtime::PrefixCache* cache,
                          const runtime::Prompt& prompt, GenerationOptions opt, bool parse) {
  opt.parse_output = parse;
  opt.parser.start = prompt.start;
  opt.cancel = &g_interrupt;
  Printer printer(isatty(fileno(stdout)) != 0);
  g_interrupt.store(false);
  runtime::GenerationCallbacks cb;
  cb.on_event = [&](const ParseEvent& e) { printer.event(e); };
  // a long prefill shows its progress on the terminal (after half a second; cleared after)
  ProgressBar bar("prefill", int64_t(prompt.ids.size()), "tokens");
  cb.on_prefill = [&](int64_t done, int64_t) { bar.update(done); };
  cb.on_token = [&](int32_t) { bar.finish(); };
  GenerationResult r = gen.generate(prompt.ids, opt, cb);
  bar.finish();
  printer.finish();
  print_stats(r, cache);
  return r;
}

constexpr const char* kChatHelp =
    "  /think [N]   thinking on, reasoning effort N in 1..100 (default 75)\n"
    "  /nothink     thinking off\n"
    "  /reset       forget the conversation\n"
    "  /help        this list\n"
    "  /exit        leave (also Ctrl-D)\n"
    "  a line ending in \\ continues on the next; a line of \"\"\" starts and ends a "
    "multi-line message\n"
    "  on a terminal: arrow keys edit and recall, Ctrl-R searches the history "
    "($CEDAR_HISTORY, default ~/.cedar_history)\n";

int interactive(Engine& engine, runtime::PrefixCache* cache, const RunConfig& rc) {
  Generator gen(engine, cache);
  ojson history = ojson::array();
  if (!rc.system.empty()) history.push_back(ojson{{"role", "system"}, {"content", rc.system}});
  const ojson base = history;
  bool thinking = rc.thinking;
  int effort = rc.effort;
  LineReader reader(isatty(fileno(stdin)) != 0);
  std::fprintf(stderr, "cedar run: chat with %s (%d threads). /help for commands\n",
               rc.engine.model_dir.c_str(), engine.threads());
  for (;;) {
    const std::optional<std::string> got = reader.next();
    if (!got) break;
    const std::string& line = *got;
    if (line.empty()) continue;
    if (line[0] == '/') {
      std::istringstream cmd(line);
      std::string word;
      cmd >> word;
      if (word == "/exit" || word == "/quit") break;
      if (word == "/help" || word == "/?") {
        std::fprintf(stderr, "%s", kChatHelp);
      } else if (word == "/nothink") {
        thinking = false;
        std::fprintf(stderr, "thinking off\n");
      } else if (word == "/think") {
        std::string v;
        cmd >> v;
        char* end = nullptr;
        const long e = v.empty() ? 75 : std::strtol(v.c_str(), &end, 10);
        if ((!v.empty() && *end != '\0') || e < 1 || e > 100) {
          std::fprintf(stderr, "/think takes an effort between 1 and 100\n");
          continue;
        }
        thinking = true;
        effort = int(e);
        std::fprintf(stderr, "thinking on, effort %d\n", effort);
      } else if (word == "/reset") {
        history = base;
        gen.reset();
        std::fprintf(stderr, "history cleared\n");
      } else {
        std::fprintf(stderr, "unknown command %s (/help lists them)\n", word.c_str());
      }
      continue;
    }
    ojson turn = history;
    turn.push_back(ojson{{"role", "user"}, {"content", line}});
    runtime::Prompt prompt;
    try {
      prompt = engine.render_request(chat_body(turn, thinking, effort));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "cedar run: %s\n", e.what());
      continue;
    }
    GenerationResult r = run_turn(gen, cache, prompt, rc.gen, true);
    history = std::move(turn);
    history.push_back(ojson(r.message.to_openai()));
  }
  return 0;
}

}  // namespace

int cmd_run(int argc, char** argv) {
  RunConfig rc;
  try {
    if (!parse_flags(argc, argv, &rc)) return 0;
  } catch (const UsageError& e) {
    // the option parser's messages already point at --help
    const std::string msg = e.what();
    std::fprintf(stderr, "cedar run: error: %s%s\n", msg.c_str(),
                 msg.find("--help") == std::string::npos ? " (see cedar run --help)" : "");
    return 2;
  }
  auto engine = load_engine(rc.engine, "cedar run", rc.prefetch);
  std::unique_ptr<Ranks> ranks;
  try {
    ranks = Ranks::start(*rc.args, rc.engine.model_dir, engine->checkpoint(), engine->kernels(),
                         version_string());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "cedar run: error: %s\n", e.what());
    return 1;
  }
  if (ranks && !ranks->attach(*engine)) return 0;  // another rank: served its layers
  if (ranks) std::fprintf(stderr, "cedar run: %s\n", ranks->describe(engine->config()).c_str());
  std::fprintf(stderr, "cedar run: %s\n", describe_kernels(engine->kernels()).c_str());
  const bool has_drafter = engine->model().dspark() != nullptr;
  if (rc.speculative == "dspark" && !has_drafter) {
    std::fprintf(stderr, "cedar run: error: --speculative dspark: %s has no DSpark stages\n",
                 rc.engine.model_dir.c_str());
    return 2;
  }
  rc.gen.speculative.enabled =
      rc.speculative.empty() ? has_drafter && !ranks : rc.speculative == "dspark";
  std::unique_ptr<runtime::PrefixCache> cache;
  if (!rc.cache_dir.empty()) cache = std::make_unique<runtime::PrefixCache>(*engine, rc.cache);
  // Ctrl-C cancels the running generation (checked between steps). No SA_RESTART: at the chat
  // prompt it interrupts the read, which ends the session.
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
  if (rc.interactive) return interactive(*engine, cache.get(), rc);

  Generator gen(*engine, cache.get());
  runtime::Prompt prompt;
  if (rc.raw) {
    prompt = engine->encode_raw(rc.prompt);
  } else {
    ojson messages = ojson::array();
    if (!rc.system.empty()) messages.push_back(ojson{{"role", "system"}, {"content", rc.system}});
    // the images first, then the text (as an OpenAI image_url part per file)
    ojson content = rc.prompt;
    if (!rc.images.empty()) {
      content = ojson::array();
      for (const auto& f : rc.images)
        content.push_back({{"type", "image_url"}, {"image_url", {{"url", f}}}});
      content.push_back({{"type", "text"}, {"text", rc.prompt}});
    }
    messages.push_back(ojson{{"role", "user"}, {"content", content}});
    prompt = engine->render_request(chat_body(messages, rc.thinking, rc.effort));
  }
  std::vector<std::string> bytes;
  for (const auto& f : prompt.images) bytes.push_back(read_file(f, "--image"));
  const std::vector<PromptImage> images =
      attach_images(engine->config(), &prompt.ids, bytes);  // the spans' ids, the patches
  rc.gen.images = images;
  run_turn(gen, cache.get(), prompt, rc.gen, !rc.raw);
  return 0;
}

}  // namespace cedar::app
