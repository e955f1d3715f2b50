#include "app/run_output.h"

#include <unistd.h>

#include <cstdio>
#include <string>

#include "base/progress.h"

namespace cedar::app {

namespace {

using server::CompletionEvent;
using server::Finish;

// Streams the pipeline's events to stdout. Reasoning on a terminal sits between a "Thinking..."
// line and a "...done thinking." line, dimmed (the marker stays readable where dim is not shown,
// e.g. in a capture); piped, it sits between <think> lines so that scripts can cut it out. Tool
// calls print as "[tool call NAME] ARGS".
class Printer {
 public:
  Printer(bool tty, bool hide_thinking) : tty_(tty), hide_(hide_thinking) {}

  void event(const CompletionEvent& e) {
    using K = CompletionEvent::Kind;
    switch (e.kind) {
      case K::kReasoning:
        if (hide_) return;
        if (!shown_open_) {
          std::fputs(tty_ ? "\x1b[2mThinking...\n" : "<think>\n", stdout);
          shown_open_ = true;
          at_line_start_ = true;
        }
        put(e.text);
        break;
      case K::kContent:
        end_reasoning();
        put(e.text);
        break;
      case K::kToolBegin:
        end_reasoning();
        std::fprintf(stdout, "%s[tool call %s] ", at_line_start_ ? "" : "\n", e.name.c_str());
        at_line_start_ = false;
        break;
      case K::kToolArgs:
        put(e.text);
        break;
      case K::kToolEnd:
        put("\n");
        break;
      default:
        return;
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
    if (!shown_open_) return;
    shown_open_ = false;
    if (!at_line_start_) put("\n");
    std::fputs(tty_ ? "...done thinking.\x1b[0m\n\n" : "</think>\n", stdout);
  }

  bool tty_, hide_;
  bool shown_open_ = false;  // the reasoning marker is open on stdout
  bool at_line_start_ = true;
};

void print_stats(const TurnResult& t, const runtime::PrefixCache* cache) {
  const runtime::GenerationResult& r = t.gen;
  const double pf = r.prefill_seconds > 0 ? double(r.prefill_computed) / r.prefill_seconds : 0.0;
  const double dc =
      r.decode_seconds > 0 ? double(r.usage.completion_tokens) / r.decode_seconds : 0.0;
  std::fprintf(stderr,
               "cedar run: prompt %lld tokens (%lld cached), prefill %.1f tok/s, decode %.1f "
               "tok/s, %lld tokens, finish %s",
               (long long)r.usage.prompt_tokens, (long long)r.usage.cached_tokens, pf, dc,
               (long long)r.usage.completion_tokens,
               server::openai_finish_reason(t.outcome.finish));
  if (t.outcome.usage.reasoning_tokens > 0)
    std::fprintf(stderr, " (%lld reasoning)", (long long)t.outcome.usage.reasoning_tokens);
  std::fputc('\n', stderr);
  if (cache != nullptr) {
    const runtime::RestoreInfo ri = cache->last_restore();
    if (ri.source != runtime::RestoreInfo::Source::kNone && ri.tokens > 0)
      std::fprintf(stderr, "cedar run: prefix cache hit (%s): %lld tokens%s, %.3f s\n",
                   runtime::source_name(ri.source), (long long)ri.tokens,
                   ri.replayed ? ", window rebuilt by bounded replay" : "", ri.seconds);
  }
}

}  // namespace

TurnResult run_turn(runtime::Generator& gen, const runtime::PrefixCache* cache,
                    const runtime::Prompt& prompt, runtime::GenerationOptions opt,
                    const TurnOutput& out, std::atomic<bool>* cancel, const char* limit_flag) {
  opt.start = prompt.start;
  opt.cancel = cancel;
  cancel->store(false);
  server::CompletionSetup setup;
  setup.parser.start = prompt.start;
  setup.raw = !out.parse;
  setup.stop = out.stop;
  server::CompletionPipeline pipe(setup);
  const runtime::Engine& engine = gen.engine();
  const int32_t think_end = engine.tokenizer().token_to_id(text::kThinkEnd).value_or(-1);
  Printer printer(styled_terminal(stdout), out.hide_thinking);
  std::vector<CompletionEvent> evs;
  auto print = [&] {
    for (const CompletionEvent& e : evs) printer.event(e);
    evs.clear();
  };
  runtime::GenerationCallbacks cb;
  // a long prefill shows its progress on the terminal (after half a second; cleared after)
  ProgressBar bar("prefill", int64_t(prompt.ids.size()), "tokens");
  cb.on_prefill = [&](int64_t done, int64_t) { bar.update(done); };
  cb.on_token = [&](int32_t id) {
    bar.finish();
    pipe.on_token(id, think_end);
  };
  cb.on_text = [&](const std::string& text) {
    if (pipe.on_text(text, &evs)) cancel->store(true);  // a stop string: the answer ends here
    print();
  };
  TurnResult t;
  t.gen = gen.generate(prompt.ids, opt, cb);
  bar.finish();
  const bool in_reasoning = pipe.in_reasoning();  // (before finish() closes it)
  Finish f = Finish::kStop;
  if (t.gen.finish == runtime::FinishReason::kLength) f = Finish::kLength;
  if (t.gen.finish == runtime::FinishReason::kCancelled)
    f = pipe.stopped() ? Finish::kStop : Finish::kCancelled;
  pipe.finish(f, &evs);
  print();
  printer.finish();
  t.outcome = pipe.outcome();
  print_stats(t, cache);
  if (t.outcome.finish == Finish::kCancelled)
    std::fprintf(stderr, "cedar run: stopped (Ctrl-C)\n");
  else if (t.outcome.finish == Finish::kLength && in_reasoning)
    std::fprintf(stderr,
                 "cedar run: the answer was cut off inside its reasoning at %lld tokens: raise "
                 "the limit (%s) or lower the effort (--think N; /think N in chat)\n",
                 (long long)t.gen.usage.completion_tokens, limit_flag);
  return t;
}

}  // namespace cedar::app
