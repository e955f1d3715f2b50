// `cedar perplexity -m DIR -f FILE [-c N] [--kernels K] [--exact-prefill] [--json]`: llama.cpp's
// perplexity tool adapted to CED prefill. The file's tokens are cut into windows of N tokens (a
// BOS and N - 1 tokens of text); each window is one prompt, run on a fresh state, and scored on
// its last k = min(W, N / 2) rows -- the rows the CED decoder computes (the replay window, W =
// sliding_window: 128) --
// each row predicting the token after it (the last row the first token of the next window). CED
// and exact prefill are therefore scored on the same positions, and their perplexities compare.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "app/commands.h"
#include "app/load_model.h"
#include "app/read_file.h"
#include "base/args.h"
#include "text/dsml.h"

namespace cedar::app {

namespace {

struct Window {
  double nll = 0;  // sum over the scored rows
  int64_t scored = 0;
};

// -log p(target) of one row of logits, in double (the row's max subtracted first).
double row_nll(const float* row, int64_t vocab, int32_t target) {
  const float mx = *std::max_element(row, row + vocab);
  double sum = 0;
  for (int64_t v = 0; v < vocab; ++v) sum += std::exp(double(row[v]) - double(mx));
  return std::log(sum) - (double(row[target]) - double(mx));
}

// Runs one window (ids: its N prompt tokens, then the token after them) and scores its last k
// rows.
Window score_window(runtime::Engine& engine, const std::vector<int32_t>& ids, int64_t k, bool exact,
                    std::vector<float>* logits) {
  const int64_t n = int64_t(ids.size()) - 1, vocab = engine.config().vocab_size;
  SequenceState st = engine.model().new_state();
  ForwardOptions opt;
  ForwardResult r;
  if (exact) {  // the rows before the scored ones without logits; exact mode splits bit-exactly
    opt.mode = PrefillMode::kExact;
    opt.logits = LogitsWanted::kNone;
    if (n > k) engine.forward(st, ids.data(), int(n - k), 0, opt, nullptr);
    opt.logits = LogitsWanted::kAll;
    logits->resize(size_t(k) * size_t(vocab));
    r = engine.forward(st, ids.data() + (n - k), int(k), n - k, opt, logits->data());
  } else {
    opt.mode = PrefillMode::kCed;
    opt.logits = LogitsWanted::kReplay;
    // the decoder's rows: the last min(window, n) (spec §9.4)
    logits->resize(size_t(std::min<int64_t>(n, engine.config().sliding_window)) * size_t(vocab));
    r = engine.forward(st, ids.data(), int(n), 0, opt, logits->data());
  }
  const int64_t first = n - k;  // the first scored row's position
  if (r.logits_first_pos < 0 || r.logits_first_pos > first ||
      r.logits_first_pos + r.logits_rows != n)
    throw std::runtime_error("the forward returned rows [" + std::to_string(r.logits_first_pos) +
                             ", +" + std::to_string(r.logits_rows) + ") for a window of " +
                             std::to_string(n) + " scored from " + std::to_string(first));
  Window w;
  for (int64_t p = first; p < n; ++p) {
    const float* row = logits->data() + size_t(p - r.logits_first_pos) * size_t(vocab);
    w.nll += row_nll(row, vocab, ids[size_t(p + 1)]);
    ++w.scored;
  }
  return w;
}

}  // namespace

int cmd_perplexity(int argc, char** argv) {
  Args args(
      "perplexity",
      {{"model", "m", true, "model directory or GGUF file (default: the embedded default model)"},
       {"file", "f", true, "UTF-8 text file to score (required)"},
       {"ctx-size", "c", true, "tokens per window (default 512)"},
       {"chunks", "", true, "score at most this many windows (default: all)"},
       {"exact-prefill", "", false, "run every layer on every prompt row (default: CED)"},
       {"kernels", "", true, kKernelsHelp},
       {"head-type", "", true, kHeadTypeHelp},
       {"gguf-requant", "", false, kGgufRequantHelp},
       {"threads", "t", true, "worker threads (default: all cores)"},
       {"json", "", false, "print one JSON object (perplexity, tokens, ...) on stdout"}});
  args.parse(argc, argv);
  if (args.help_requested()) {
    std::printf("%s", args.usage().c_str());
    return 0;
  }
  runtime::EngineOptions eo;
  eo.model_dir = model_dir_or_default(args);
  const std::string path = args.require("file");
  const long long ctx = args.get_int("ctx-size", 512);
  if (ctx < 2 || ctx > (1 << 20)) throw std::runtime_error("--ctx must be in [2, 1048576]");
  const long long chunks = args.get_int("chunks", 0);
  if (chunks < 0) throw std::runtime_error("--chunks must be >= 0");
  eo.threads = threads_option(args, "cedar perplexity");
  eo.kernels = args.get("kernels", "");
  eo.gguf_requant = args.has("gguf-requant");
  eo.head_type = parse_head_type(args.get("head-type", "stored"));
  const bool exact = args.has("exact-prefill"), json = args.has("json");
  const std::string text = read_file(path, "-f");

  auto engine = load_engine(eo, "cedar perplexity", /*prefetch=*/true);
  const auto& cfg = engine->config();
  if (cfg.max_position_embeddings > 0 && ctx > cfg.max_position_embeddings)
    throw std::runtime_error("--ctx " + std::to_string(ctx) + " exceeds the model's context (" +
                             std::to_string(cfg.max_position_embeddings) + ")");
  const std::vector<int32_t> toks = engine->encode_raw(text, /*add_bos=*/false).ids;
  const int32_t bos = int32_t(cfg.bos_token_id);
  const int64_t body = ctx - 1;  // text tokens per window after its BOS
  int64_t windows = int64_t(toks.size()) > body ? (int64_t(toks.size()) - 1) / body : 0;
  if (chunks > 0) windows = std::min<int64_t>(windows, chunks);
  if (windows == 0)
    throw std::runtime_error("-f " + path + ": " + std::to_string(toks.size()) +
                             " tokens, fewer than one window of --ctx " + std::to_string(ctx) +
                             " needs (" + std::to_string(ctx) + ")");
  const int64_t k = std::min<int64_t>(cfg.sliding_window, ctx / 2);

  const auto t0 = std::chrono::steady_clock::now();
  double nll = 0;
  int64_t scored = 0;
  std::vector<int32_t> ids;
  std::vector<float> logits;
  for (int64_t w = 0; w < windows; ++w) {
    ids.assign(1, bos);
    ids.insert(ids.end(), toks.begin() + w * body, toks.begin() + (w + 1) * body + 1);
    const Window r = score_window(*engine, ids, k, exact, &logits);
    nll += r.nll;
    scored += r.scored;
    if (!json) std::fprintf(stderr, "[%lld]%.4f ", (long long)(w + 1), std::exp(nll / scored));
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double ppl = std::exp(nll / double(scored));
  if (json) {
    text::ojson o = {{"perplexity", ppl},
                     {"nll", nll / double(scored)},
                     {"tokens", scored},
                     {"windows", windows},
                     {"ctx", ctx},
                     {"scored_per_window", k},
                     {"prefill", exact ? "exact" : "ced"},
                     {"kernels", std::string(engine->kernels().name)},
                     {"file_tokens", toks.size()},
                     {"seconds", secs}};
    std::printf("%s\n", o.dump().c_str());
  } else {
    std::fprintf(stderr, "\n");
    std::printf(
        "perplexity %.4f over %lld tokens (%lld windows of %lld, last %lld rows each, %s "
        "prefill, %s kernels, %.1f s)\n",
        ppl, (long long)scored, (long long)windows, ctx, (long long)k, exact ? "exact" : "CED",
        std::string(engine->kernels().name).c_str(), secs);
  }
  return 0;
}

}  // namespace cedar::app
