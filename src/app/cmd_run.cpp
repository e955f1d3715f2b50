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
#include "app/load_model.h"
#include "app/ranks.h"
#include "app/read_file.h"
#include "app/run_chat.h"
#include "app/run_output.h"
#include "app/sampling_flags.h"
#include "base/args.h"
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

std::atomic<bool> g_interrupt{false};
extern "C" void on_sigint(int) { g_interrupt.store(true); }

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
  // what every turn uses: sampling and limits, thinking and effort, the system message, the stop
  // strings (matched on the answer), whether the reasoning is shown
  ChatSettings chat;
  bool interactive = true;
  std::string prompt;
  bool raw = false;
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
            with_rank_options(with_sampling_options(
                {{"model", "m", true,
                  "model directory or GGUF file (default: the embedded default model)"},
                 {"prompt", "p", true,
                  "one-shot prompt (absent: a chat on a terminal; stdin that is not a terminal is "
                  "read as one prompt)"},
                 {"file", "f", true, "one-shot prompt read from a file (-: standard input)"},
                 {"interactive", "i", false,
                  "chat even when stdin is not a terminal (one turn per line, for scripts)"},
                 {"n-predict", "n", true,
                  "max completion tokens, reasoning included (default 32768, as the server's; "
                  "-1: until the context is full)"},
                 {"ctx-size", "c", true, "context size, prompt + completion (default: model)"},
                 {"threads", "t", true, "worker threads (default: all cores)"},
                 {"seed", "s", true, "sampling seed (default 0)"},
                 {"stop", "", true, "stop string (repeatable)"},
                 {"image", "", true,
                  "an image file (PNG, JPEG, WebP, GIF) before the prompt's text (repeatable; "
                  "one-shot prompts)"},
                 {"think", "", true, "thinking on with reasoning effort 1..100 (default 75)"},
                 {"nothink", "", false, "thinking off"},
                 {"hide-thinking", "", false,
                  "do not print the reasoning (it is still generated and counted)"},
                 {"system", "", true, "system message"},
                 {"raw", "", false, "plain-text prompt (BOS + BPE), unparsed output"},
                 {"exact-prefill", "", false, "every layer on every prompt row (default: CED)"},
                 {"chunk", "", true, "prefill chunk size in tokens (default 512)"},
                 {"cache-ram", "", true,
                  "prefix cache memory in MiB: each chat turn reuses the last prompt's state "
                  "(default 2048; 0: off)"},
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
                 {"gguf-requant", "", false, kGgufRequantHelp}})));
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
  try {
    rc->engine.head_type = parse_head_type(args.get("head-type", "stored"));
  } catch (const std::exception& e) {
    throw UsageError(e.what());
  }
  // a rank reads its layers' pages as it uses them, not the whole checkpoint
  rc->prefetch = !args.has("no-prefetch") && !args.has("ranks");
  try {
    (void)choose_kernels(rc->engine.kernels);
  } catch (const std::exception& e) {
    throw UsageError(std::string("option --kernels: ") + e.what());
  }

  if (args.has("prompt") && args.has("file")) throw UsageError("give only one of -p and -f");
  if (args.has("interactive") && (args.has("prompt") || args.has("file")))
    throw UsageError("-i (--interactive) reads the chat from stdin: not with -p or -f");
  // where the prompt comes from: -p, -f FILE, -f - or stdin that is not a terminal (one
  // prompt, as `cat notes.txt | cedar run` means), else a chat
  const bool piped = isatty(fileno(stdin)) == 0 && !args.has("interactive");
  const std::string file = args.has("file")               ? args.get("file")
                           : piped && !args.has("prompt") ? "-"
                                                          : "";
  rc->interactive = !args.has("prompt") && file.empty();
  if (args.has("prompt")) {
    rc->prompt = args.get("prompt");
  } else if (file == "-") {
    std::stringstream ss;
    ss << std::cin.rdbuf();
    rc->prompt = ss.str();
  } else if (!file.empty()) {
    std::ifstream in(file, std::ios::binary);
    if (!in) throw UsageError("option --file " + file + ": cannot open");
    std::stringstream ss;
    ss << in.rdbuf();
    rc->prompt = ss.str();
  }
  if (!rc->interactive && rc->prompt.empty())
    throw UsageError(args.has("prompt") || args.has("file")
                         ? "the prompt is empty"
                         : "stdin is not a terminal and holds no prompt (pipe one in, give -p "
                           "TEXT, or -i for a chat read from stdin)");
  rc->chat.hide_thinking = args.has("hide-thinking");

  GenerationOptions& g = rc->chat.gen;
  const long long n = int_flag(args, "n-predict", runtime::kDefaultMaxTokens, -1, LLONG_MAX,
                               "-1 or a positive integer");
  if (n == 0) throw UsageError("option --n-predict must be -1 or a positive integer, got 0");
  g.max_tokens = n;
  g.ctx_size = int_flag(args, "ctx-size", 0, 0, LLONG_MAX, ">= 0");
  try {
    const SamplingDefaults sd = sampling_defaults(args, rc->engine.model_dir, "cedar run");
    g.sampling.temperature = sd.temperature;
    g.sampling.top_k = sd.top_k;
    g.sampling.top_p = sd.top_p;
    g.sampling.min_p = sd.min_p;
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  g.sampling.seed = uint64_t(int_flag(args, "seed", 0, 0, LLONG_MAX, ">= 0"));
  rc->chat.stop = stops;
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
  rc->cache.memory_bytes = uint64_t(int_flag(args, "cache-ram", 2048, 0, 1ll << 30, ">= 0 (MiB)"))
                           << 20;
  rc->cache.interval = int_flag(args, "cache-interval", 1024, 0, LLONG_MAX, ">= 0");
  rc->cache.store_window = args.has("cache-window");
  rc->raw = args.has("raw");
  rc->chat.system = args.get("system");
  if (args.has("think") && args.has("nothink"))
    throw UsageError("--think and --nothink exclude each other");
  rc->chat.effort = int(int_flag(args, "think", 75, 1, 100, "between 1 and 100"));
  rc->chat.thinking = !args.has("nothink");
  if (rc->raw && rc->interactive)
    throw UsageError("--raw needs a one-shot prompt (-p, -f or stdin)");
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
  rc.chat.gen.speculative.enabled =
      rc.speculative.empty() ? has_drafter && !ranks : rc.speculative == "dspark";
  // The prefix cache: a chat keeps each turn's prompt-end state in memory (as the server does),
  // so the next turn reuses it in both thinking modes; --cache-dir adds the disk tier.
  std::unique_ptr<runtime::PrefixCache> cache;
  const bool chat_cache = rc.interactive && rc.cache.memory_bytes > 0 && !ranks;
  if (!rc.cache_dir.empty() || chat_cache)
    cache = std::make_unique<runtime::PrefixCache>(*engine, rc.cache);
  // Ctrl-C sets the flag: a generation stops between steps; at the chat prompt it interrupts
  // the read (no SA_RESTART), which drops the line being typed.
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  sigaction(SIGINT, &sa, nullptr);
  if (rc.interactive) {
    rc.chat.model_name = rc.engine.model_dir;
    return run_chat(*engine, cache.get(), rc.chat, isatty(fileno(stdin)) != 0, &g_interrupt);
  }

  Generator gen(*engine, cache.get());
  runtime::Prompt prompt;
  if (rc.raw) {
    prompt = engine->encode_raw(rc.prompt);
  } else {
    ojson messages = ojson::array();
    if (!rc.chat.system.empty()) messages.push_back(ojson{{"role", "system"}, {"content", rc.chat.system}});
    // the images first, then the text (as an OpenAI image_url part per file)
    ojson content = rc.prompt;
    if (!rc.images.empty()) {
      content = ojson::array();
      for (const auto& f : rc.images)
        content.push_back({{"type", "image_url"}, {"image_url", {{"url", f}}}});
      content.push_back({{"type", "text"}, {"text", rc.prompt}});
    }
    messages.push_back(ojson{{"role", "user"}, {"content", content}});
    prompt = engine->render_request(chat_body(messages, rc.chat.thinking, rc.chat.effort));
  }
  std::vector<std::string> bytes;
  for (const auto& f : prompt.images) bytes.push_back(read_file(f, "--image"));
  const std::vector<PromptImage> images =
      attach_images(engine->config(), &prompt.ids, bytes);  // the spans' ids, the patches
  rc.chat.gen.images = images;
  TurnOutput out;
  out.parse = !rc.raw;
  out.hide_thinking = rc.chat.hide_thinking;
  out.stop = rc.chat.stop;
  const TurnResult r = run_turn(gen, cache.get(), prompt, rc.chat.gen, out, &g_interrupt, "-n N");
  // an interrupted one-shot run exits as a shell expects of Ctrl-C (128 + SIGINT)
  return r.outcome.finish == server::Finish::kCancelled ? 130 : 0;
}

}  // namespace cedar::app
